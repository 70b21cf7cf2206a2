package prismtx

import (
	"encoding/binary"

	"github.com/rdmakit/rdmakit/txn"
)

// A slot is 64 bytes (one cache line), 64-byte aligned, eight native-order
// words in two 32-byte halves, each changed only by enhanced CASes of at
// most 32 bytes:
//
//	word 0  PW      the highest prepared writer's timestamp
//	word 1  PR      the highest prepared (validated) reader's timestamp
//	word 2  ptr     the committed version: an item buffer (or the absent item) …
//	word 3  C       … and the last committed (or cleaned-up) writer's timestamp
//	word 4  key id  0 while the slot is empty, then the key's identity hash
//	word 5  0
//	word 6  pendPtr the prepared writer's version (ALLOCATEd at prepare) …
//	word 7  pendTS  … and its timestamp
//
// Words 0–3 are the half every protocol CAS acts on: read validation
// (16 bytes, words 0–1), write validation, installation and cleanup (32
// bytes, words 0–3); installation takes its swap operand (words 2–3) from
// words 6–7 by INDIRECT_ARG. ⟨ptr, C⟩ is a bounded pointer whose bound
// is C: a GET reads through it under the NIC's atomics lock, so it never
// sees an install half-done (C swapped, ptr not yet); the bound only
// matters for C = 0, a key never written, whose read returns nothing.
const (
	slotSize = 64
	wPW      = 0
	wPR      = 1
	wPtr     = 2
	wC       = 3
	offKeyID = 32
	offPend  = 48 // pendPtr, pendTS
)

// An item (a version) is an ALLOCATEd buffer, never modified while a slot
// points to it:
//
//	┌────────┬──────────┬──────────┬──────┬──────────┬─────┬───────┐
//	│ TS u64 │ klen u16 │ flags u8 │ 0 u8 │ vlen u32 │ key │ value │   little-endian
//	└────────┴──────────┴──────────┴──────┴──────────┴─────┴───────┘
//
// flags: flagTomb for a deleted record (a tombstone version), flagAbsent
// for the node's absent item (timestamp 0) that claimed slots point to
// before their first write.
const (
	itemHead   = 16
	flagTomb   = 1
	flagAbsent = 2
	maxItem    = itemHead + txn.MaxKey + txn.MaxValue
)

// A decision record is 16 bytes per client id, at the node id % nodes:
// ⟨timestamp, verdict⟩, native order. Word 0 is the timestamp of the id's
// latest decided transaction; a decision CAS writes ⟨TS, verdict⟩ only
// when word 0 is smaller than TS, so each timestamp gets one verdict.
const (
	recordSize     = 16
	verdictCommit  = 1
	verdictAbort   = 2
	maxClients     = 1 << 16
	recordsBytes   = recordSize * maxClients
	absentItemSize = 64
)

// itemLen is the size of the item of key and value.
func itemLen(key, value int) int { return itemHead + key + value }

// putItem encodes the item ⟨ts, key, value, flags⟩ into b (itemLen bytes).
func putItem(b []byte, ts uint64, key, value []byte, flags byte) {
	binary.LittleEndian.PutUint64(b, ts)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(key)))
	b[10], b[11] = flags, 0
	binary.LittleEndian.PutUint32(b[12:], uint32(len(value)))
	copy(b[itemHead:], key)
	copy(b[itemHead+len(key):], value)
}

// item is a decoded item header.
type item struct {
	ts    uint64
	flags byte
	klen  int
	vlen  int
}

// size is the item's total length.
func (it item) size() int { return itemHead + it.klen + it.vlen }

// readHead decodes an item's header; ok is false when the lengths are out
// of limits.
func readHead(b []byte) (it item, ok bool) {
	if len(b) < itemHead {
		return item{}, false
	}
	it = item{ts: binary.LittleEndian.Uint64(b), flags: b[10],
		klen: int(binary.LittleEndian.Uint16(b[8:])), vlen: int(binary.LittleEndian.Uint32(b[12:]))}
	return it, it.klen <= txn.MaxKey && it.vlen <= txn.MaxValue
}

// keyID is a key's identity in the table: a 64-bit hash independent of
// txn.Hash (which places it), never 0 (the empty slot's).
func keyID(key []byte) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, b := range key {
		h ^= uint64(b)
		h *= 0x100000001b3
		h ^= h >> 29
	}
	h ^= uint64(len(key))
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 31
	if h == 0 {
		h = 1
	}
	return h
}
