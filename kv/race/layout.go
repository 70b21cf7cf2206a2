package race

import (
	"encoding/binary"
	"hash/crc64"

	"github.com/rdmakit/rdmakit/kv"
)

// The node's region:
//
//	[0:8)     global depth
//	[8:16)    directory lock (0 free, else the holder's lease word)
//	[64: …)   directory: 1<<MaxDepth entries of 8 bytes
//	…         subtables and clients' block chunks (allocated by RPC)
//
// Directory entry: bits 0–47 subtable address, 48–53 local depth, 54–63
// version (bumped whenever the entry changes, so a client that missed a
// key can tell its cached entry is stale).
//
// Subtable: a control word, then Groups groups of three 64-byte buckets
// [main 0 | overflow | main 1] of 8 slots; a key's two candidate
// "combined buckets" (main 0 + overflow or overflow + main 1, 128 contiguous
// bytes) are one READ each. Control word: bits 0–31 writers inside,
// 32–37 local depth, bit 38 split lock, 40–63 suffix (the directory index
// bits every key of the subtable shares).
//
// Slot (8 bytes, CASed): bits 0–47 block address, 48–55 block length in
// 64-byte units (255 = at least that: read the header for the rest),
// 56–63 key fingerprint. 0 is empty.
//
// Block (written once, before its slot is installed; never modified):
// u16 key length | u16 0 | u32 value length | key | value | CRC64 of all
// that.
const (
	MaxDepth     = 16
	dirOff       = 64
	Groups       = 64
	bucketSlots  = 8
	bucketBytes  = bucketSlots * 8
	groupBytes   = 3 * bucketBytes
	ctlBytes     = 64
	subtableSize = ctlBytes + Groups*groupBytes
	blockHead    = 8
	blockUnit    = 64
	maxUnits     = 255
)

// Control word fields.
const (
	ctlCount = 1<<32 - 1
	ctlLock  = 1 << 38
)

func ctlDepth(w uint64) uint    { return uint(w>>32) & 63 }
func ctlSuffix(w uint64) uint64 { return w >> 40 }
func mkCtl(depth uint, suffix uint64, lock bool) uint64 {
	w := uint64(depth)<<32 | suffix<<40
	if lock {
		w |= ctlLock
	}
	return w
}

// Directory entry fields.
func dirAddr(e uint64) uint64    { return e & (1<<48 - 1) }
func dirDepth(e uint64) uint     { return uint(e>>48) & 63 }
func dirVersion(e uint64) uint64 { return e >> 54 }
func mkDir(addr uint64, depth uint, version uint64) uint64 {
	return addr | uint64(depth)<<48 | (version&1023)<<54
}

// Slot fields.
func slotAddr(s uint64) uint64 { return s & (1<<48 - 1) }
func slotUnits(s uint64) int   { return int(s>>48) & 255 }
func slotFP(s uint64) byte     { return byte(s >> 56) }
func mkSlot(addr uint64, blockLen int, fp byte) uint64 {
	u := min((blockLen+blockUnit-1)/blockUnit, maxUnits)
	return addr | uint64(u)<<48 | uint64(fp)<<56
}

// place is where a key may live.
type place struct {
	h              uint64 // directory index bits come from here
	fp             byte
	group1, group2 int
	half1, half2   int // 0: main 0 + overflow, 1: overflow + main 1
}

func placeOf(key []byte) place {
	h := kv.Hash(key)
	h2 := mix(h ^ 0x9e3779b97f4a7c15)
	return place{h: h, fp: byte(h >> 56), group1: int((h >> 24) % Groups), half1: int(h>>20) & 1,
		group2: int((h2 >> 24) % Groups), half2: int(h2>>20) & 1}
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// combinedOff is the offset in a subtable of a combined bucket.
func combinedOff(group, half int) int { return ctlBytes + group*groupBytes + half*bucketBytes }

var crcTable = crc64.MakeTable(crc64.ECMA)

// blockLen is the size of key and value's block.
func blockLen(key, value int) int { return blockHead + key + value + 8 }

func putBlock(b, key, value []byte) {
	binary.LittleEndian.PutUint16(b, uint16(len(key)))
	binary.LittleEndian.PutUint16(b[2:], 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(value)))
	copy(b[blockHead:], key)
	copy(b[blockHead+len(key):], value)
	n := blockHead + len(key) + len(value)
	binary.LittleEndian.PutUint64(b[n:], crc64.Checksum(b[:n], crcTable))
}

// blockSize reads the full size of a block from its header (0 if the
// header is implausible).
func blockSize(b []byte) int {
	if len(b) < blockHead {
		return 0
	}
	k, v := int(binary.LittleEndian.Uint16(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if k > kv.MaxKey || v > kv.MaxValue {
		return 0
	}
	return blockLen(k, v)
}

// readBlock checks a block's CRC and returns its key and value.
func readBlock(b []byte) (key, value []byte, ok bool) {
	n := blockSize(b)
	if n == 0 || n > len(b) {
		return nil, nil, false
	}
	k := int(binary.LittleEndian.Uint16(b))
	if crc64.Checksum(b[:n-8], crcTable) != binary.LittleEndian.Uint64(b[n-8:]) {
		return nil, nil, false
	}
	return b[blockHead : blockHead+k], b[blockHead+k : n-8], true
}
