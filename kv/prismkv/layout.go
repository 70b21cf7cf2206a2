package prismkv

import (
	"encoding/binary"

	"github.com/rdmakit/rdmakit/kv"
)

// The node's region, one region so that indirect operations can follow
// a slot to its item:
//
//	[0, 16·Slots)   slots ⟨item address, item length⟩ (bounded pointers)
//	emptyOff        the empty item every unused slot points to
//	ringOff         the return ring clients give old items back through
//	poolOff …       item buffers, posted to the free lists (prism.Pool)
//
// Item: u16 key length | u8 flags (bit 0 tombstone, bit 1 empty) | u8 0 |
// u32 value length | key | value. A key keeps its slot forever (a DELETE
// installs a tombstone item), so a slot that once held a key always
// does: GETs and PUTs may go straight to a cached slot.
const (
	slotSize  = 16
	itemHead  = 8
	flagTomb  = 1
	flagEmpty = 2
	flagFree  = 4
	maxItem   = itemHead + kv.MaxKey + kv.MaxValue
)

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
