package prismkv

import (
	"encoding/binary"

	"github.com/rdmakit/rdmakit/kv"
)

// The node's region, one region so that indirect operations can follow
// a slot to its item:
//
//	[0, 16·Slots)   slots ⟨item address, item length⟩ (bounded pointers)
//	emptyOff        the empty item unused slots point to; at +32 the free
//	                item slots point to once their key is deleted
//	distOff         the farthest any key was put from its home slot
//	lockOff         one lock word per segment of segSlots slots
//	ringOff         the return ring clients give old items back through
//	poolOff …       item buffers, posted to the free lists (prism.Pool)
//
// Item: u16 key length | u8 flags (bit 0 tombstone (no longer written),
// bit 1 empty, bit 2 free) | u8 0 | u32 value length | key | value. A slot is empty (never
// used: it ends every probe sequence through it), holds a key's item, or
// is free (its key was deleted: probes pass it, a new key may take it).
const (
	slotSize  = 16
	itemHead  = 8
	flagTomb  = 1 // no longer written: a DELETE frees the slot
	flagEmpty = 2
	flagFree  = 4
	maxItem   = itemHead + kv.MaxKey + kv.MaxValue
)

// Addresses relative to the empty item (the node's info carries only
// it), and the table's fixed shape.
const (
	freeItemOff = 32 // the free item, 32-byte aligned for the key check's indirect CAS
	// distOff is a word that bounds probe sequences: the farthest (in
	// slots) any key was ever put from its home slot. An insert raises it
	// (an atomic max) before its CAS, so a lookup that read it and probed
	// that far has seen every slot its key could be in.
	distOff = 64
	lockOff = 128 // the first segment's lock word
	// segSlots slots share a lock: a client inserting a new key holds
	// the lock of its key's home segment (install.go, claim).
	segSlots = 64
)

// segments is the number of lock segments of a table of slots slots.
func segments(slots int) int { return (slots + segSlots - 1) / segSlots }

// itemLen is the size of the item of key and value.
func itemLen(key, value int) int { return itemHead + key + value }

// putItem encodes an item into b (itemLen bytes).
func putItem(b, key, value []byte, flags byte) {
	binary.LittleEndian.PutUint16(b, uint16(len(key)))
	b[2], b[3] = flags, 0
	binary.LittleEndian.PutUint32(b[4:], uint32(len(value)))
	copy(b[itemHead:], key)
	copy(b[itemHead+len(key):], value)
}

// readItem decodes an item, checking its lengths against len(b).
func readItem(b []byte) (key, value []byte, flags byte, ok bool) {
	if len(b) < itemHead {
		return nil, nil, 0, false
	}
	k, v := int(binary.LittleEndian.Uint16(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if itemHead+k+v != len(b) {
		return nil, nil, 0, false
	}
	return b[itemHead : itemHead+k], b[itemHead+k:], b[2], true
}
