package replica_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
)

// FuzzUnmarshal: the decoders of what replicas and clients send each
// other take any bytes without panicking, refuse what does not decode
// with a typed error, and read back what the encoders wrote.
func FuzzUnmarshal(f *testing.F) {
	l := blockstore.Layout{BlockSize: 4096, Blocks: 100, Replicas: []string{"a:1", "b:2", "c:3"}}
	lb, _ := replica.MarshalLayout(l)
	ib, _ := replica.Info{Layout: l, RKey: 7, Slots: 1 << 20, Zero: 1<<20 + 1600, Ring: 1<<20 + 1<<16, RingSlots: 64, BufSize: 8192}.Marshal()
	f.Add(lb)
	f.Add(ib)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		typed := func(err error) bool {
			for _, e := range []error{blockstore.ErrProtocol, blockstore.ErrBlockSize, blockstore.ErrOutOfRange, blockstore.ErrReplicas} {
				if errors.Is(err, e) {
					return true
				}
			}
			return false
		}
		if l, err := replica.UnmarshalLayout(b); err != nil {
			if !typed(err) {
				t.Fatalf("layout %x: untyped %v", b, err)
			}
		} else if again, err := replica.MarshalLayout(l); err != nil {
			t.Fatalf("layout %+v does not encode: %v", l, err)
		} else if l2, err := replica.UnmarshalLayout(again); err != nil || !reflect.DeepEqual(l, l2) {
			t.Fatalf("layout %+v read back as %+v, %v", l, l2, err)
		}
		if in, err := replica.UnmarshalInfo(b); err != nil {
			if !typed(err) {
				t.Fatalf("info %x: untyped %v", b, err)
			}
		} else if again, err := in.Marshal(); err != nil {
			t.Fatalf("info %+v does not encode: %v", in, err)
		} else if in2, err := replica.UnmarshalInfo(again); err != nil || !reflect.DeepEqual(in, in2) {
			t.Fatalf("info %+v read back as %+v, %v", in, in2, err)
		}
	})
}
