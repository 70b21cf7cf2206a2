package sherman

import (
	"bytes"
	"errors"
	"slices"
	"sort"
)

// errTorn: a node or entry read while it was being written (or bytes
// that are not a node). The reader reads it again.
var errTorn = errors.New("sherman: torn node")

// node is a decoded node. Leaves keep their entries unsorted, by slot;
// internal nodes keep separators sorted, with the child of keys below
// the first in leftmost.
type node struct {
	ver      uint64
	level    int
	hasLow   bool
	hasHigh  bool
	low      []byte
	high     []byte
	sibling  uint64
	leftmost uint64
	keys     [][]byte // internal: separators, ascending
	kids     []uint64 // internal: kids[i] holds keys ≥ keys[i]
	ents     []entry  // leaf: the used slots
	free     []int    // leaf: the empty slots
}

// entry is one used slot of a leaf.
type entry struct {
	slot int
	ver  uint32 // entry-level version
	key  []byte
	val  []byte
}

// covers reports whether key is inside the node's fences.
func (n *node) covers(key []byte) bool {
	return (!n.hasLow || bytes.Compare(key, n.low) >= 0) && !n.past(key)
}

// past reports whether key is at or above the high fence: it belongs to
// a node to the right (B-link: follow the sibling).
func (n *node) past(key []byte) bool { return n.hasHigh && bytes.Compare(key, n.high) >= 0 }

// child is the child of an internal node whose range holds key.
func (n *node) child(key []byte) uint64 {
	i := sort.Search(len(n.keys), func(i int) bool { return bytes.Compare(n.keys[i], key) > 0 })
	if i == 0 {
		return n.leftmost
	}
	return n.kids[i-1]
}

// find is the leaf entry of key, or nil.
func (n *node) find(key []byte) *entry {
	for i := range n.ents {
		if bytes.Equal(n.ents[i].key, key) {
			return &n.ents[i]
		}
	}
	return nil
}

// decode checks and decodes the node in b (g.size bytes): errTorn when
// the versions, a checksum or a length disagree. The node's slices
// alias b.
func (g *geometry) decode(b []byte) (*node, error) {
	n := new(node)
	if err := g.decodeInto(n, b); err != nil {
		return nil, err
	}
	return n, nil
}

// decodeInto is decode into n, whose slices it reuses (a reader's
// scratch node: no allocation once they have grown).
func (g *geometry) decodeInto(n *node, b []byte) error {
	if len(b) != g.size {
		return errTorn
	}
	*n = node{ver: u64(b[offVer:]), keys: n.keys[:0], kids: n.kids[:0], ents: n.ents[:0], free: n.free[:0]}
	if u64(b[g.size-8:]) != n.ver {
		return errTorn
	}
	n.level = int(b[offLevel])
	flags := b[offFlags]
	n.hasLow, n.hasHigh = flags&flagLow != 0, flags&flagHigh != 0
	end, z := g.head, g.zLeaf
	if n.level > 0 {
		end, z = g.size-8, g.zInner
	}
	if u32(b[offCRC:]) != sumZ(z, b[offVer:offCRC], b[offSibling:end]) {
		return errTorn
	}
	n.sibling, n.leftmost = u64(b[offSibling:]), u64(b[offLeftmost:])
	var ok bool
	if n.low, ok = g.fence(b[offFences:]); !ok {
		return errTorn
	}
	if n.high, ok = g.fence(b[offFences+1+g.KeySize:]); !ok {
		return errTorn
	}
	if n.level > 0 {
		return g.decodeInner(n, b, int(u16(b[offCount:])))
	}
	return g.decodeLeaf(n, b)
}

func (g *geometry) fence(b []byte) ([]byte, bool) {
	k := int(b[0])
	if k > g.KeySize {
		return nil, false
	}
	return b[1 : 1+k : 1+k], true
}

func (g *geometry) decodeInner(n *node, b []byte, count int) error {
	if count > g.InnerSlots || n.leftmost == 0 {
		return errTorn
	}
	n.keys, n.kids = slices.Grow(n.keys[:0], count)[:count], slices.Grow(n.kids[:0], count)[:count]
	for i := range count {
		e := b[g.head+i*g.innerEnt:]
		k := int(e[0])
		if k == 0 || k > g.KeySize {
			return errTorn
		}
		n.keys[i] = e[1 : 1+k : 1+k]
		n.kids[i] = u64(e[g.innerEnt-8:])
		if n.kids[i] == 0 || i > 0 && bytes.Compare(n.keys[i-1], n.keys[i]) >= 0 {
			return errTorn
		}
	}
	return nil
}

func (g *geometry) decodeLeaf(n *node, b []byte) error {
	n.ents = slices.Grow(n.ents, g.LeafSlots) // one allocation for a new node, none for a reused one
	for i := range g.LeafSlots {
		e, err := g.decodeEntry(b[g.head+i*g.leafEnt:][:g.leafEnt], uint32(n.ver))
		if err != nil {
			return err
		}
		if len(e.key) == 0 {
			n.free = append(n.free, i)
			continue
		}
		e.slot = i
		n.ents = append(n.ents, e)
	}
	return nil
}

// Leaf entry: front version u32 · crc u32 · klen u8 · vlen u16 · key ·
// value · padding · rear version u32 · node tag u32. The tag is the low
// half of the node version the entry was written under: a node read
// half before and half after a split's rewrite has entries of two tags.
func (g *geometry) decodeEntry(e []byte, tag uint32) (entry, error) {
	r := len(e) - 8
	v := u32(e)
	if u32(e[r:]) != v || u32(e[r+4:]) != tag || u32(e[4:]) != sumZ(g.zEnt, e[0:4], e[8:]) {
		return entry{}, errTorn
	}
	k, vl := int(e[8]), int(u16(e[9:]))
	if k > g.KeySize || vl > g.ValueSize || k == 0 && vl != 0 {
		return entry{}, errTorn
	}
	return entry{ver: v, key: e[11 : 11+k : 11+k], val: e[11+g.KeySize : 11+g.KeySize+vl : 11+g.KeySize+vl]}, nil
}

// encodeEntry writes e (an empty key for an empty slot) into the leaf
// entry bytes dst under node version ver.
func (g *geometry) encodeEntry(dst []byte, e entry, ver uint64) {
	clear(dst)
	r := len(dst) - 8
	put32(dst, e.ver)
	dst[8] = byte(len(e.key))
	put16(dst[9:], uint16(len(e.val)))
	copy(dst[11:], e.key)
	copy(dst[11+g.KeySize:], e.val)
	put32(dst[r:], e.ver)
	put32(dst[r+4:], uint32(ver))
	put32(dst[4:], sum(dst[0:4], dst[8:]))
}

// encode writes the whole node n into dst (g.size bytes). A leaf's
// entries go to the slots they name.
func (g *geometry) encode(dst []byte, n *node) {
	clear(dst)
	put64(dst[offVer:], n.ver)
	put64(dst[g.size-8:], n.ver)
	dst[offLevel] = byte(n.level)
	var flags byte
	if n.hasLow {
		flags |= flagLow
	}
	if n.hasHigh {
		flags |= flagHigh
	}
	dst[offFlags] = flags
	put64(dst[offSibling:], n.sibling)
	put64(dst[offLeftmost:], n.leftmost)
	dst[offFences] = byte(len(n.low))
	copy(dst[offFences+1:], n.low)
	dst[offFences+1+g.KeySize] = byte(len(n.high))
	copy(dst[offFences+2+g.KeySize:], n.high)
	end := g.head
	if n.level > 0 {
		put16(dst[offCount:], uint16(len(n.keys)))
		for i, k := range n.keys {
			e := dst[g.head+i*g.innerEnt:]
			e[0] = byte(len(k))
			copy(e[1:], k)
			put64(e[g.innerEnt-8:], n.kids[i])
		}
		end = g.size - 8
	} else {
		used := make([]bool, g.LeafSlots)
		for _, e := range n.ents {
			used[e.slot] = true
			g.encodeEntry(g.slot(dst, e.slot), e, n.ver)
		}
		for i, u := range used {
			if !u {
				g.encodeEntry(g.slot(dst, i), entry{}, n.ver)
			}
		}
	}
	put32(dst[offCRC:], sum(dst[offVer:offCRC], dst[offSibling:end]))
}

// slot is leaf slot i's bytes in node bytes b.
func (g *geometry) slot(b []byte, i int) []byte { return b[g.head+i*g.leafEnt:][:g.leafEnt] }
