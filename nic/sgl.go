package nic

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// Moving bytes between a scatter/gather list and memory. One rule holds
// for every path that touches a responder's memory (local, link, direct):
// 8 bytes at an 8-byte-aligned address move in one piece, with one atomic
// load or store, so that a READ of a word never sees half of a concurrent
// atomic or WRITE, and a WRITE of a word is never seen half done. Anything
// else is copied byte by byte.

// aligned8 reports whether b starts at an 8-byte-aligned address.
func aligned8(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&7 == 0 }

// load8 loads the 8 bytes at b, in one piece when they are aligned.
func load8(b []byte) uint64 {
	if aligned8(b) {
		return atomic.LoadUint64(word(b))
	}
	return binary.NativeEndian.Uint64(b)
}

// store8 stores v into the 8 bytes at b, in one piece when they are
// aligned.
func store8(b []byte, v uint64) {
	if aligned8(b) {
		atomic.StoreUint64(word(b), v)
		return
	}
	binary.NativeEndian.PutUint64(b, v)
}

// readMem copies responder memory src into the local list dst.
func readMem(dst [][]byte, src []byte) {
	if len(src) == 8 && len(dst) == 1 && len(dst[0]) == 8 {
		binary.NativeEndian.PutUint64(dst[0], load8(src))
		return
	}
	scatter(dst, src)
}

// writeMem copies the local list src into responder memory dst.
func writeMem(dst []byte, src [][]byte) {
	if len(dst) == 8 && len(src) == 1 && len(src[0]) == 8 {
		store8(dst, binary.NativeEndian.Uint64(src[0]))
		return
	}
	gather(dst, src)
}

// putWords stores the first len(out)/8 words of w into out.
func putWords(out []byte, w *[4]uint64) {
	for i := 0; i < len(out)/8; i++ {
		binary.NativeEndian.PutUint64(out[8*i:], w[i])
	}
}

// gather copies the buffers of src, in order, into dst and returns the
// number of bytes copied.
func gather(dst []byte, src [][]byte) int {
	off := 0
	for _, b := range src {
		off += copy(dst[off:], b)
	}
	return off
}

// scatter copies src into the buffers of dst, in order.
func scatter(dst [][]byte, src []byte) {
	for _, b := range dst {
		src = src[copy(b, src):]
	}
}

// copyLists copies the bytes of the src list into the dst list.
func copyLists(dst, src [][]byte) {
	di, doff := 0, 0
	for _, s := range src {
		for len(s) > 0 && di < len(dst) {
			k := copy(dst[di][doff:], s)
			s = s[k:]
			doff += k
			if doff == len(dst[di]) {
				di, doff = di+1, 0
			}
		}
	}
}
