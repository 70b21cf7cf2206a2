package cm

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestDescsRoundTrip(t *testing.T) {
	for _, descs := range [][]MRDesc{
		{},
		{{Addr: 0x7f0000001000, Len: 4096, RKey: 0xdeadbeef}},
		{{1, 2, 3}, {math.MaxUint64, 0, math.MaxUint32}, {0, math.MaxUint64, 0}},
		make([]MRDesc, MaxDescs),
	} {
		b := EncodeDescs(descs)
		if len(b) > MaxPrivateData {
			t.Fatalf("%d descriptors encode to %d bytes", len(descs), len(b))
		}
		got, err := DecodeDescs(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(descs) {
			t.Fatalf("got %d descriptors, want %d", len(got), len(descs))
		}
		for i := range got {
			if got[i] != descs[i] {
				t.Fatalf("descriptor %d: %v, want %v", i, got[i], descs[i])
			}
		}
	}
	if b := EncodeDescs(make([]MRDesc, MaxDescs+1)); len(b) <= MaxPrivateData {
		t.Fatalf("MaxDescs+1 descriptors fit in %d bytes", len(b))
	}
}

func TestDecodeDescsErrors(t *testing.T) {
	good := EncodeDescs([]MRDesc{{1, 2, 3}})
	for name, b := range map[string][]byte{
		"empty":    nil,
		"short":    good[:4],
		"version":  append([]byte{2}, good[1:]...),
		"missing":  good[:len(good)-1],
		"trailing": append(append([]byte(nil), good...), 0),
		"count":    {1, 0xff, 0xff, 0xff, 0xff},
		"overflow": EncodeDescs([]MRDesc{{Addr: math.MaxUint64, Len: 2}}),
	} {
		if _, err := DecodeDescs(b); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDescContains(t *testing.T) {
	d := MRDesc{Addr: 1000, Len: 100}
	for _, tc := range []struct {
		addr, n uint64
		want    bool
	}{
		{1000, 100, true}, {1000, 0, true}, {1099, 1, true}, {1100, 0, true},
		{999, 1, false}, {1099, 2, false}, {1100, 1, false}, {1000, 101, false},
		{math.MaxUint64, 2, false}, {1050, math.MaxUint64, false},
	} {
		if got := d.Contains(tc.addr, tc.n); got != tc.want {
			t.Errorf("Contains(%d, %d) = %v", tc.addr, tc.n, got)
		}
	}
	if s := (MRDesc{0x1000, 4096, 0xab}).String(); s != "addr=0x1000 len=4096 rkey=0xab" {
		t.Errorf("String() = %q", s)
	}
}

// FuzzDecodeDescs: the decoder never panics, allocates only for the bytes
// it has, and what it accepts re-encodes to the same bytes.
func FuzzDecodeDescs(f *testing.F) {
	f.Add(EncodeDescs(nil))
	f.Add(EncodeDescs([]MRDesc{{0x7f0000001000, 4096, 0xdeadbeef}}))
	f.Add(EncodeDescs([]MRDesc{{1, 2, 3}, {4, 5, 6}}))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		descs, err := DecodeDescs(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error does not wrap ErrProtocol: %v", err)
			}
			return
		}
		if len(descs)*descLen > len(b) {
			t.Fatalf("%d descriptors from %d bytes", len(descs), len(b))
		}
		for _, d := range descs {
			if d.Addr+d.Len < d.Addr || !d.Contains(d.Addr, d.Len) {
				t.Fatalf("accepted %v", d)
			}
		}
		if enc := EncodeDescs(descs); !bytes.Equal(enc, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", enc, b)
		}
	})
}
