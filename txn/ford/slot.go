package ford

import (
	"encoding/binary"
	"hash/crc64"

	"github.com/rdmakit/rdmakit/txn"
)

// A slot (little-endian), the same in every copy of a shard:
//
//	[0:8)    lock word: 0 unlocked, else a lockWord (owner and lease)
//	[8:16)   version: 0 never written, +1 at every committed write
//	[16:24)  meta: u8 key length (0: empty slot) | u8 flags (bit 0 present) | u16 0 | u32 value length
//	[24:32)  CRC64 of version ‖ meta ‖ key ‖ value: a READ that raced a write fails it
//	[32:96)  key
//	[96:…)   value
//
// A commit WRITEs [8, 96+value length) and then the lock word: a copy's
// image is whole before its unlock lands (one QP, in order).
const (
	slotLock    = 0
	slotVersion = 8
	slotMeta    = 16
	slotCRC     = 24
	slotKey     = 32
	slotValue   = 96
	flagPresent = 1
)

// object is a decoded slot.
type object struct {
	lock    uint64
	version uint64
	klen    int
	present bool
	key     []byte // aliases the buffer
	value   []byte // aliases the buffer
}

// slotCRCOf is the CRC of a slot image.
func slotCRCOf(version uint64, meta, key, value []byte) uint64 {
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], version)
	c := crc64.Update(0, crcTable, v[:])
	c = crc64.Update(c, crcTable, meta)
	c = crc64.Update(c, crcTable, key)
	return crc64.Update(c, crcTable, value)
}

// decodeSlot decodes a READ's copy of a slot (at least slotValue bytes,
// the value after it as far as b goes). ok is false when the bytes are
// torn or hostile (lengths out of bounds, CRC mismatch): read again. An
// empty slot (key length 0) is ok.
func decodeSlot(b []byte, valueSize int) (s object, ok bool) {
	if len(b) < slotValue {
		return s, false
	}
	s.lock = binary.LittleEndian.Uint64(b[slotLock:])
	s.version = binary.LittleEndian.Uint64(b[slotVersion:])
	meta := b[slotMeta : slotMeta+8]
	s.klen = int(meta[0])
	if s.klen == 0 {
		return s, true
	}
	vlen := int(binary.LittleEndian.Uint32(meta[4:]))
	if s.klen > txn.MaxKey || vlen > valueSize || slotValue+vlen > len(b) {
		return s, false
	}
	s.present = meta[1]&flagPresent != 0
	s.key = b[slotKey : slotKey+s.klen]
	s.value = b[slotValue : slotValue+vlen]
	return s, binary.LittleEndian.Uint64(b[slotCRC:]) == slotCRCOf(s.version, meta, s.key, s.value)
}

// imageLen is the bytes a commit writes for a value of vlen bytes, from
// slotVersion on.
func imageLen(vlen int) int { return slotValue - slotVersion + vlen }

// putImage encodes the committed image of key at version (present with
// value, or deleted) into b (imageLen bytes): what a commit WRITEs at
// slotVersion.
func putImage(b []byte, version uint64, key []byte, present bool, value []byte) {
	if !present {
		value = nil
	}
	clear(b[:imageLen(len(value))])
	binary.LittleEndian.PutUint64(b, version)
	meta := b[slotMeta-slotVersion : slotMeta-slotVersion+8]
	meta[0] = byte(len(key))
	if present {
		meta[1] = flagPresent
	}
	binary.LittleEndian.PutUint32(meta[4:], uint32(len(value)))
	copy(b[slotKey-slotVersion:], key)
	copy(b[slotValue-slotVersion:], value)
	binary.LittleEndian.PutUint64(b[slotCRC-slotVersion:], slotCRCOf(version, meta, key, value))
}
