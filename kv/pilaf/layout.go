package pilaf

import (
	"encoding/binary"
	"hash/crc64"
)

// The node's region: the index, Buckets entries of 32 bytes, then the
// extents. Linear probing: a key lives in the first entry from
// Hash(key) mod Buckets that holds it; an empty entry ends the search, a
// tombstone (a deleted key) does not.
//
// Entry, little-endian:
//
//	[0:8)   extent address
//	[8:12)  extent length
//	[12:16) meta: bit 31 valid, bit 30 tombstone, bits 0–23 key fingerprint
//	[16:24) CRC64 of the extent
//	[24:32) CRC64 of bytes [0:24)
//
// An all-zero entry is empty. Extent: u16 key length | u16 0 | u32 value
// length | key | value.
const (
	entrySize  = 32
	window     = 4 // entries a GET reads at once
	extentHead = 8
	metaValid  = 1 << 31
	metaTomb   = 1 << 30
	fpMask     = 1<<24 - 1
)

var crcTable = crc64.MakeTable(crc64.ECMA)

func crc(b []byte) uint64 { return crc64.Checksum(b, crcTable) }

// entry is a decoded index entry.
type entry struct {
	addr   uint64
	length uint32
	meta   uint32
	extCRC uint64
}

func (e entry) valid() bool     { return e.meta&metaValid != 0 }
func (e entry) tombstone() bool { return e.meta&metaTomb != 0 }
func (e entry) fp() uint32      { return e.meta & fpMask }

// fingerprint is the 24 bits of a key's hash an entry keeps.
func fingerprint(h uint64) uint32 { return uint32(h>>40) & fpMask }

// putEntry encodes e into b (32 bytes) with its CRC.
func putEntry(b []byte, e entry) {
	binary.LittleEndian.PutUint64(b, e.addr)
	binary.LittleEndian.PutUint32(b[8:], e.length)
	binary.LittleEndian.PutUint32(b[12:], e.meta)
	binary.LittleEndian.PutUint64(b[16:], e.extCRC)
	binary.LittleEndian.PutUint64(b[24:], crc(b[:24]))
}

// readEntry decodes b (32 bytes): ok is false for a torn entry (CRC
// mismatch); empty for an all-zero one.
func readEntry(b []byte) (e entry, empty, ok bool) {
	sum := binary.LittleEndian.Uint64(b[24:])
	if sum == 0 && allZero(b[:24]) {
		return entry{}, true, true
	}
	if crc(b[:24]) != sum {
		return entry{}, false, false
	}
	return entry{addr: binary.LittleEndian.Uint64(b), length: binary.LittleEndian.Uint32(b[8:]),
		meta: binary.LittleEndian.Uint32(b[12:]), extCRC: binary.LittleEndian.Uint64(b[16:])}, false, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// extentLen is the size of the extent of key and value.
func extentLen(key, value int) int { return extentHead + key + value }

// putExtent encodes key and value into b (extentLen bytes).
func putExtent(b, key, value []byte) {
	binary.LittleEndian.PutUint16(b, uint16(len(key)))
	binary.LittleEndian.PutUint16(b[2:], 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(value)))
	copy(b[extentHead:], key)
	copy(b[extentHead+len(key):], value)
}

// readExtent decodes an extent, checking its lengths against len(b).
func readExtent(b []byte) (key, value []byte, ok bool) {
	if len(b) < extentHead {
		return nil, nil, false
	}
	k, v := int(binary.LittleEndian.Uint16(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if extentHead+k+v != len(b) {
		return nil, nil, false
	}
	return b[extentHead : extentHead+k], b[extentHead+k:], true
}

// rawEntry decodes b without checking its CRC (tests: what a client
// without CRCs would see).
func rawEntry(b []byte) entry {
	return entry{addr: binary.LittleEndian.Uint64(b), length: binary.LittleEndian.Uint32(b[8:]),
		meta: binary.LittleEndian.Uint32(b[12:]), extCRC: binary.LittleEndian.Uint64(b[16:])}
}
