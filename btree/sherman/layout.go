package sherman

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/rdmakit/rdmakit/btree"
)

// Layout sizes a tree's nodes. Every client of a tree must use the same
// one: the first client writes it to the memory's header, the others
// compare.
type Layout struct {
	// KeySize is the longest key, 1 to btree.MaxKey bytes (default 16).
	KeySize int
	// ValueSize is the longest value, 0 to btree.MaxValue bytes (default
	// 16).
	ValueSize int
	// LeafSlots is the entries of a leaf, 4 to 1023 (default 16).
	LeafSlots int
	// InnerSlots is the separators of an internal node, 4 to 1023
	// (default 32).
	InnerSlots int
}

// withDefaults fills the zero fields and checks the others.
func (l Layout) withDefaults() (Layout, error) {
	if l.KeySize == 0 {
		l.KeySize = 16
	}
	if l.ValueSize == 0 {
		l.ValueSize = 16
	}
	if l.LeafSlots == 0 {
		l.LeafSlots = 16
	}
	if l.InnerSlots == 0 {
		l.InnerSlots = 32
	}
	if l.KeySize < 1 || l.KeySize > btree.MaxKey || l.ValueSize < 0 || l.ValueSize > btree.MaxValue ||
		l.LeafSlots < 4 || l.LeafSlots > 1023 || l.InnerSlots < 4 || l.InnerSlots > 1023 {
		return l, fmt.Errorf("%w: %+v", btree.ErrLayout, l)
	}
	return l, nil
}

// word is the layout as the header's first word: a magic and the four
// sizes.
func (l Layout) word() uint64 {
	return 0x5348<<48 | uint64(l.KeySize)<<41 | uint64(l.ValueSize)<<30 | uint64(l.LeafSlots)<<20 | uint64(l.InnerSlots)<<10 | 1
}

// Region header: the layout word, the root pointer (memory node 0 only)
// and the chunk counter; then one lock word per node, then the nodes.
const (
	offLayout = 0
	offRoot   = 8
	offChunk  = 16
	offLocks  = 64
	// chunkNodes is the nodes a client takes from a memory node at once.
	chunkNodes = 16
)

// Node header (all words native order, as the NIC's atomics):
//
//	0   front version  u64
//	8   level u8 · flags u8 · count u16 · crc u32
//	16  sibling        u64
//	24  leftmost       u64 (internal nodes)
//	32  low fence: len u8, key[K]; high fence: len u8, key[K]
//	H   entries
//	S-8 back version   u64
const (
	offVer      = 0
	offLevel    = 8
	offFlags    = 9
	offCount    = 10
	offCRC      = 12
	offSibling  = 16
	offLeftmost = 24
	offFences   = 32

	flagLow  = 1 // the node has a low fence (else −∞)
	flagHigh = 2 // the node has a high fence (else +∞)
)

// geometry is a layout's byte offsets and sizes.
type geometry struct {
	Layout
	head     int // H: where entries start
	leafEnt  int // bytes of a leaf entry
	innerEnt int // bytes of an internal entry
	size     int // bytes of a node

	// The CRCs of as many zero bytes as a checksum covers (sumZ): a
	// leaf entry, a leaf's header, an internal node.
	zEnt, zLeaf, zInner uint32
}

func round8(n int) int { return (n + 7) &^ 7 }

func newGeometry(l Layout) geometry {
	g := geometry{Layout: l}
	g.head = offFences + round8(2+2*l.KeySize)
	// Leaf entry: front version u32, crc u32, klen u8, vlen u16, key,
	// value, padding, rear version u32 + 4 spare bytes.
	g.leafEnt = round8(11+l.KeySize+l.ValueSize) + 8
	// Internal entry: klen u8, key, padding, child u64.
	g.innerEnt = round8(1+l.KeySize) + 8
	g.size = g.head + max(l.LeafSlots*g.leafEnt, l.InnerSlots*g.innerEnt) + 8
	g.zEnt = zeroSum(g.leafEnt - 4)
	g.zLeaf = zeroSum(offCRC - offVer + g.head - offSibling)
	g.zInner = zeroSum(offCRC - offVer + g.size - 8 - offSibling)
	return g
}

// Pointers name a node: its memory node (high 32 bits) and its index
// there plus one (0 is nil). The first node of memory node 0 is the
// first root, so zeroed memory is an empty tree.
func mkPtr(mn, idx int) uint64 { return uint64(mn)<<32 | uint64(idx+1) }

func ptrNode(p uint64) int { return int(p >> 32) }
func ptrIdx(p uint64) int  { return int(uint32(p)) - 1 }

// firstRoot is the root while the root word is 0.
var firstRoot = mkPtr(0, 0)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sum is a CRC32-C of a and b, XORed with that of as many zero bytes,
// so zeroed memory checks out (an empty leaf, an empty entry).
func sum(a, b []byte) uint32 { return sumZ(zeroSum(len(a)+len(b)), a, b) }

// sumZ is sum with the zero bytes' CRC given (z = zeroSum(len(a)+len(b))):
// the decoder's lengths are fixed per geometry, so it computes z once.
func sumZ(z uint32, a, b []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, a), castagnoli, b) ^ z
}

// zeros is what zeroSum hashes (a package variable: a local array
// passed to crc32 would be allocated on every call).
var zeros [256]byte

// zeroSum is the CRC32-C of n zero bytes.
func zeroSum(n int) uint32 {
	var z uint32
	for ; n > 0; n -= min(n, len(zeros)) {
		z = crc32.Update(z, castagnoli, zeros[:min(n, len(zeros))])
	}
	return z
}

func u64(b []byte) uint64      { return binary.NativeEndian.Uint64(b) }
func put64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }
func u32(b []byte) uint32      { return binary.NativeEndian.Uint32(b) }
func put32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func u16(b []byte) uint16      { return binary.NativeEndian.Uint16(b) }
func put16(b []byte, v uint16) { binary.NativeEndian.PutUint16(b, v) }
