package prismtx

import (
	"bytes"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
)

// FuzzItem: an item header decodes without panicking, within the limits,
// and an encoded item decodes back to what was put in it.
func FuzzItem(f *testing.F) {
	b := make([]byte, itemLen(3, 5))
	putItem(b, 42, []byte("key"), []byte("value"), flagTomb)
	f.Add(b, uint64(7), []byte("k"), []byte("v"))
	f.Add([]byte{1, 2, 3}, uint64(0), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, raw []byte, ts uint64, key, value []byte) {
		if it, ok := readHead(raw); ok && (it.klen > txn.MaxKey || it.vlen > txn.MaxValue) {
			t.Fatalf("%+v accepted", it)
		}
		if len(key) > txn.MaxKey || len(value) > txn.MaxValue {
			return
		}
		b := make([]byte, itemLen(len(key), len(value)))
		putItem(b, ts, key, value, 0)
		it, ok := readHead(b)
		if !ok || it.ts != ts || it.size() != len(b) || !bytes.Equal(b[itemHead:itemHead+it.klen], key) ||
			!bytes.Equal(b[itemHead+it.klen:], value) {
			t.Fatalf("round trip of %q=%q at %d: %+v %v", key, value, ts, it, ok)
		}
	})
}

// FuzzLayout: a node's layout answer decodes or fails with ErrProtocol,
// never panics, and a layout decodes back to itself.
func FuzzLayout(f *testing.F) {
	b := make([]byte, infoLen)
	layout{Base: 1 << 20, RKey: 9, Slots: 64, Absent: 5, Records: 6, Ring: 7, RingSlots: 8}.marshal(b)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		l, err := unmarshalLayout(raw)
		if err != nil {
			return
		}
		out := make([]byte, infoLen)
		l.marshal(out)
		if !bytes.Equal(out[:44], raw[:44]) { // the last 4 bytes are padding
			t.Fatalf("%x decodes to %+v, which encodes to %x", raw, l, out)
		}
		if l2, err := unmarshalLayout(out); err != nil || l2 != l {
			t.Fatalf("%+v encodes to %x, which decodes to %+v, %v", l, out, l2, err)
		}
	})
}
