package farm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/txn"
)

// Layout is a database's placement: its memory nodes, how many backups
// each shard has, and the shape of every shard's table. Every client and
// node of a database holds the same Layout (MethodCreate gives it to the
// nodes).
type Layout struct {
	// Nodes are the memory nodes' cm addresses. There are as many shards
	// as nodes: shard s's primary is node s, its backups nodes s+1 … s+F
	// (mod len(Nodes)).
	Nodes []string
	// F is the number of backups of each shard (default 1); every shard
	// has F+1 copies on F+1 distinct nodes.
	F int
	// Buckets is the number of object slots of each shard's table
	// (default 4096): the most keys a shard holds, deleted ones included.
	Buckets int
	// ValueSize is the largest value an object holds (default
	// txn.MaxValue); every slot has room for it.
	ValueSize int
}

// Defaults of Layout.
const (
	DefaultBuckets = 4096
	// MaxProbe is how far from its home slot a key may live (bounded
	// linear probing): a lookup READs at most this many slots at once.
	MaxProbe = 32
	// FirstProbe is how many slots of its window a lookup READs first;
	// the rest only when those hold other keys (rare below half load).
	FirstProbe = 4
)

// ErrLayout: a layout the nodes cannot hold, or two layouts that differ.
var ErrLayout = errors.New("farm: bad layout")

func (l *Layout) defaults() {
	if l.F == 0 {
		l.F = 1
	}
	if l.Buckets == 0 {
		l.Buckets = DefaultBuckets
	}
	if l.ValueSize == 0 {
		l.ValueSize = txn.MaxValue
	}
}

// check validates a layout with its defaults set.
func (l *Layout) check() error {
	switch {
	case len(l.Nodes) < 2 || len(l.Nodes) > 255:
		return fmt.Errorf("%w: %d nodes (2 to 255)", ErrLayout, len(l.Nodes))
	case l.F < 1 || l.F >= len(l.Nodes):
		return fmt.Errorf("%w: %d backups of %d nodes (1 to nodes-1)", ErrLayout, l.F, len(l.Nodes))
	case l.Buckets < MaxProbe || l.Buckets > 1<<26:
		return fmt.Errorf("%w: %d buckets (%d to 2^26)", ErrLayout, l.Buckets, MaxProbe)
	case l.ValueSize < 1 || l.ValueSize > txn.MaxValue:
		return fmt.Errorf("%w: values of %d bytes (1 to %d)", ErrLayout, l.ValueSize, txn.MaxValue)
	}
	return nil
}

// Shards is the number of shards (one per node).
func (l *Layout) Shards() int { return len(l.Nodes) }

// Replicas returns the nodes holding shard s, the primary first.
func (l *Layout) Replicas(s int) []int {
	r := make([]int, l.F+1)
	for i := range r {
		r[i] = (s + i) % len(l.Nodes)
	}
	return r
}

// copyOf is the index of shard s's copy among node n's tables: 0 for its
// own primary shard, i for the shard it backs up as i-th backup; -1 when
// n holds no copy of s.
func (l *Layout) copyOf(n, s int) int {
	i := (n - s + len(l.Nodes)) % len(l.Nodes)
	if i > l.F {
		return -1
	}
	return i
}

// SlotSize is the bytes of one object slot: header, key, value, rounded
// up to 64.
func (l *Layout) SlotSize() int { return (slotValue + l.ValueSize + 63) &^ 63 }

// home is key's first slot: probing never wraps, so a key's window is
// [home, home+MaxProbe). The hash is mixed again first: txn.Shard took
// h mod shards, and a table size sharing a factor with the shard count
// would otherwise leave most homes of a shard unused.
func (l *Layout) home(h uint64) int {
	h ^= h >> 31
	h *= 0x9e3779b97f4a7c15
	h ^= h >> 29
	return int(h % uint64(l.Buckets-MaxProbe+1))
}

// marshal encodes the layout: u8 F | u32 buckets | u32 value size | u8
// nodes | (u8 length | address)…
func (l *Layout) marshal() []byte {
	b := []byte{byte(l.F)}
	b = binary.LittleEndian.AppendUint32(b, uint32(l.Buckets))
	b = binary.LittleEndian.AppendUint32(b, uint32(l.ValueSize))
	b = append(b, byte(len(l.Nodes)))
	for _, n := range l.Nodes {
		b = append(b, byte(len(n)))
		b = append(b, n...)
	}
	return b
}

// unmarshalLayout decodes marshal's bytes.
func unmarshalLayout(b []byte) (Layout, error) {
	var l Layout
	if len(b) < 10 {
		return l, fmt.Errorf("%w: a %d-byte layout", ErrProtocol, len(b))
	}
	l.F, l.Buckets, l.ValueSize = int(b[0]), int(binary.LittleEndian.Uint32(b[1:])), int(binary.LittleEndian.Uint32(b[5:]))
	n, b := int(b[9]), b[10:]
	for range n {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return l, fmt.Errorf("%w: a short layout", ErrProtocol)
		}
		l.Nodes, b = append(l.Nodes, string(b[1:1+int(b[0])])), b[1+int(b[0]):]
	}
	return l, l.check()
}

// equal reports whether two layouts are the same.
func (l *Layout) equal(o *Layout) bool {
	if l.F != o.F || l.Buckets != o.Buckets || l.ValueSize != o.ValueSize || len(l.Nodes) != len(o.Nodes) {
		return false
	}
	for i := range l.Nodes {
		if l.Nodes[i] != o.Nodes[i] {
			return false
		}
	}
	return true
}

// An object slot (little-endian):
//
//	[0:8)    word: bit 63 lock, bits 0–62 version (one 8-byte store)
//	[8:16)   meta: u8 key length (0: empty slot) | u8 flags (bit 0 present) | u16 0 | u32 value length
//	[16:24)  CRC64 of version ‖ meta ‖ key ‖ value: a READ that raced a change fails it
//	[24:32)  0
//	[32:96)  key
//	[96:…)   value
const (
	slotMeta  = 8
	slotCRC   = 16
	slotKey   = 32
	slotValue = 96

	lockBit     = uint64(1) << 63
	flagPresent = 1
)

var crcTable = crc64.MakeTable(crc64.ECMA)

// object is a decoded slot.
type object struct {
	word    uint64 // lock bit and version
	klen    int
	present bool
	key     []byte // aliases the slot
	value   []byte // aliases the slot
}

func (o *object) locked() bool    { return o.word&lockBit != 0 }
func (o *object) version() uint64 { return o.word &^ lockBit }

// slotCRCOf is the CRC a slot holding version, meta, key and value
// carries.
func slotCRCOf(version uint64, meta []byte, key, value []byte) uint64 {
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], version)
	c := crc64.Update(0, crcTable, v[:])
	c = crc64.Update(c, crcTable, meta)
	c = crc64.Update(c, crcTable, key)
	return crc64.Update(c, crcTable, value)
}

// decodeSlot decodes slot bytes b (a READ's copy). ok is false when the
// bytes are torn (a write raced the READ): read again. An empty slot
// (key length 0) is ok with klen 0.
func decodeSlot(b []byte, valueSize int) (o object, ok bool) {
	o.word = binary.LittleEndian.Uint64(b)
	meta := b[slotMeta : slotMeta+8]
	o.klen = int(meta[0])
	if o.klen == 0 {
		return o, true
	}
	vlen := int(binary.LittleEndian.Uint32(meta[4:]))
	if o.klen > txn.MaxKey || vlen > valueSize {
		return o, false
	}
	o.present = meta[1]&flagPresent != 0
	o.key = b[slotKey : slotKey+o.klen]
	o.value = b[slotValue : slotValue+vlen]
	return o, binary.LittleEndian.Uint64(b[slotCRC:]) == slotCRCOf(o.version(), meta, o.key, o.value)
}

// wordAt is the 8-byte word at b[0:8) (a slot's word or meta) as one
// atomic access: the node's CPU changes it while clients READ it.
func wordAt(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }

// loadWord reads a slot's word atomically.
func loadWord(b []byte) uint64 { return atomic.LoadUint64(wordAt(b)) }

// storeWord writes a slot's word atomically.
func storeWord(b []byte, w uint64) { atomic.StoreUint64(wordAt(b), w) }

// writeSlot writes key, present and value into slot b at version (the
// node's CPU, holding the slot's lock: the word's lock bit stays set), CRC
// last but one, then the word, unlocked when unlock.
func writeSlot(b []byte, key []byte, present bool, value []byte, version uint64, unlock bool) {
	var meta [8]byte
	meta[0] = byte(len(key))
	if present {
		meta[1] = flagPresent
	} else {
		value = nil
	}
	binary.LittleEndian.PutUint32(meta[4:], uint32(len(value)))
	copy(b[slotKey:slotKey+txn.MaxKey], key)
	copy(b[slotValue:], value)
	// The meta word moves in one piece: a READ never sees a key length
	// of 0 (an empty slot) in a slot that holds a key.
	storeWord(b[slotMeta:], binary.LittleEndian.Uint64(meta[:]))
	binary.LittleEndian.PutUint64(b[slotCRC:], slotCRCOf(version, meta[:], key, value))
	w := version
	if !unlock {
		w |= lockBit
	}
	storeWord(b, w)
}
