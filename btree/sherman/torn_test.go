package sherman

import (
	"bytes"
	"fmt"
	"testing"
)

// TestTornReads splices two versions of a node the way a READ racing a
// WRITE can see them — any 8-byte-aligned middle part of one version
// inside the other (a reader overtaking a writer sees old bytes at both
// ends and new ones between) — and checks that the decoder either
// calls the node torn or returns exactly one of the two versions: a
// leaf split (whole-node rewrite) and an entry update (entry-level
// write). Without the entries' node tags the split case fails: a reader
// that overtakes the rewrite takes the old header and versions with the
// upper entries already gone.
func TestTornReads(t *testing.T) {
	l, _ := Layout{KeySize: 16, ValueSize: 16, LeafSlots: 4, InnerSlots: 4}.withDefaults()
	g := newGeometry(l)
	ents := func(kv ...string) []entry {
		var es []entry
		for i := 0; i < len(kv); i += 2 {
			es = append(es, entry{slot: i / 2, ver: 3, key: []byte(kv[i]), val: []byte(kv[i+1])})
		}
		return es
	}
	full := &node{ver: 5, ents: ents("a", "1", "b", "2", "c", "3", "d", "4")}
	split := &node{ver: 6, hasHigh: true, high: []byte("c"), sibling: mkPtr(0, 9), ents: ents("a", "1", "b", "2")}
	updated := &node{ver: 5, ents: ents("a", "1", "b", "2", "c", "3", "d", "4")}
	updated.ents[2] = entry{slot: 2, ver: 4, key: []byte("c"), val: []byte("three")}
	for _, pair := range [][2]*node{{full, split}, {full, updated}, {inner(1), inner(2)}} {
		a, b := make([]byte, g.size), make([]byte, g.size)
		g.encode(a, pair[0])
		g.encode(b, pair[1])
		if pair[1] == updated { // an entry write changes only the entry
			copy(b, a)
			g.encodeEntry(g.slot(b, 2), updated.ents[2], updated.ver)
		}
		want := []string{show(t, &g, a), show(t, &g, b)}
		accepted := 0
		for _, ab := range [][2][]byte{{a, b}, {b, a}} {
			for i := 0; i <= g.size; i += 8 {
				for j := i + 8; j <= g.size; j += 8 {
					m := bytes.Clone(ab[0])
					copy(m[i:j], ab[1][i:j])
					n, err := g.decode(m)
					if err != nil {
						continue
					}
					accepted++
					if got := describe(n); got != want[0] && got != want[1] {
						t.Fatalf("bytes [%d,%d) of one version in the other decode as %s, neither %s nor %s", i, j, got, want[0], want[1])
					}
				}
			}
		}
		if accepted == 0 {
			t.Fatal("no splice accepted (not even the whole versions)")
		}
	}
}

// inner is an internal node whose contents depend on v.
func inner(v int) *node {
	n := &node{ver: uint64(v), level: 1, leftmost: mkPtr(0, 1)}
	for i := range v + 1 {
		n.keys = append(n.keys, fmt.Appendf(nil, "k%d", i))
		n.kids = append(n.kids, mkPtr(0, 2+i))
	}
	return n
}

func show(t *testing.T, g *geometry, b []byte) string {
	n, err := g.decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return describe(n)
}

// describe is what a reader takes from a node.
func describe(n *node) string {
	s := fmt.Sprintf("v%d L%d [%q,%q) sib %x left %x", n.ver, n.level, n.low, n.high, n.sibling, n.leftmost)
	for _, e := range n.ents {
		s += fmt.Sprintf(" %d:%s=%s", e.slot, e.key, e.val)
	}
	for i, k := range n.keys {
		s += fmt.Sprintf(" %s>%x", k, n.kids[i])
	}
	return s
}
