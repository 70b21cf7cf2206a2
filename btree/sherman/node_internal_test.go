package sherman

import (
	"bytes"
	"testing"
)

// FuzzNodeRoundTrip encodes a leaf and an internal node made from the
// input, decodes them back unchanged, then decodes them with one byte
// flipped: a torn node or a node, never a panic.
func FuzzNodeRoundTrip(f *testing.F) {
	f.Add([]byte("key"), []byte("value"), uint16(40))
	f.Add([]byte("a"), []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, key, val []byte, flip uint16) {
		l, _ := Layout{KeySize: 16, ValueSize: 16, LeafSlots: 4, InnerSlots: 4}.withDefaults()
		g := newGeometry(l)
		if len(key) == 0 || len(key) > l.KeySize || len(val) > l.ValueSize {
			return
		}
		leaf := &node{ver: 7, hasLow: true, low: []byte{0}, sibling: mkPtr(0, 3),
			ents: []entry{{slot: 2, ver: 5, key: key, val: val}}}
		inner := &node{ver: 9, level: 2, hasHigh: true, high: []byte{0xff}, leftmost: mkPtr(0, 1),
			keys: [][]byte{key}, kids: []uint64{mkPtr(1, 4)}}
		for _, n := range []*node{leaf, inner} {
			b := make([]byte, g.size)
			g.encode(b, n)
			d, err := g.decode(b)
			if err != nil {
				t.Fatalf("decode of an encoded node: %v", err)
			}
			if d.level != n.level || d.ver != n.ver || d.sibling != n.sibling || !bytes.Equal(d.low, n.low) || !bytes.Equal(d.high, n.high) {
				t.Fatalf("header: %+v, want %+v", d, n)
			}
			if n.level == 0 && (len(d.ents) != 1 || d.ents[0].slot != 2 || !bytes.Equal(d.ents[0].key, key) || !bytes.Equal(d.ents[0].val, val) || len(d.free) != 3) {
				t.Fatalf("leaf entries: %+v", d.ents)
			}
			if n.level > 0 && (len(d.keys) != 1 || !bytes.Equal(d.keys[0], key) || d.kids[0] != n.kids[0] || d.leftmost != n.leftmost) {
				t.Fatalf("internal entries: %+v", d)
			}
			b[int(flip)%g.size] ^= 0x5a
			_, _ = g.decode(b)
		}
	})
}
