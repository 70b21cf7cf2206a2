package farm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// A log is a ring, a region of its own at a node, that one client (coordinator)
// WRITEs and the node's CPU reads. Positions are absolute byte counts
// (u64, never wrapping); a position p lies at offset p mod size of the
// ring's data, in lap p / size.
//
//	ring (ringHead + size bytes)
//	[0:8)        consumed: the position up to which the node has taken records (the node writes it, clients READ it)
//	[8:64)       0
//	[64:64+size) records, each 8-aligned, never across the end of the data
//
//	record
//	[0:8)        u32 length (header included, a multiple of 8) | u32 lap+1 (the lap of its position)
//	[8:length)   body (record.go); length 8 with body type 0 is a skip to the end of the lap
//
// A writer reserves [p, p+length) under its own lock, posts a WRITE of
// the body at p+8 and then an 8-byte WRITE of the header at p on the
// same QP: RC runs them in order, so the node, which takes the record
// once the header at its next position carries that position's lap,
// never sees a header before its body. Data of an older lap carries an
// older lap number. The writer may reuse the bytes of [q, q+size) only
// once consumed ≥ q; it READs consumed when its own copy says the ring is
// full. The node zeroes what it took before it moves consumed, so the
// ring holds only zeros where the writer has not written in this lap.
const (
	ringHead  = 64
	recHeader = 8
)

// recordHeader is a record's header word.
func recordHeader(length int, pos uint64, size int) uint64 {
	return uint64(uint32(length)) | (pos/uint64(size)+1)<<32
}

// ringData is the data part of a ring's bytes.
func ringData(ring []byte) []byte { return ring[ringHead:] }

// ringReader is the node's side of one ring.
type ringReader struct {
	ring    []byte // ringHead + size bytes: the ring's region
	size    int
	pos     uint64 // next record's position
	cleared uint64 // bytes before it are zero again (or not taken yet)
}

// next returns the body of the record at the reader's position, if it has
// landed, and moves past it; a skip moves to the next lap. The body
// aliases the ring: use it before calling done.
func (r *ringReader) next() ([]byte, bool) {
	for {
		off := int(r.pos % uint64(r.size))
		h := atomic.LoadUint64((*uint64)(unsafe.Pointer(&ringData(r.ring)[off])))
		length, lap := int(uint32(h)), h>>32
		if lap != r.pos/uint64(r.size)+1 || length < recHeader || length%8 != 0 || off+length > r.size {
			return nil, false
		}
		body := ringData(r.ring)[off+recHeader : off+length]
		if length == recHeader { // a skip to the end of the lap
			r.pos += uint64(r.size - off)
			continue
		}
		r.pos += uint64(length)
		return body, true
	}
}

// done publishes that every record before the reader's position has been
// taken: the writer may reuse their bytes. It zeroes them first, so that
// where the writer has not written yet the reader finds zeros, never old
// bytes: a word inside an old record's body can look like a header of
// the current lap (a value's length next to a small version number).
func (r *ringReader) done() {
	data := ringData(r.ring)
	for a := r.cleared; a < r.pos; {
		off := int(a % uint64(r.size))
		n := min(r.size-off, int(r.pos-a))
		clear(data[off : off+n])
		a += uint64(n)
	}
	r.cleared = r.pos
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.ring[0])), r.pos)
}

// ringWriter is a client's side of one ring: where its next record goes
// and what it knows of the node's progress.
type ringWriter struct {
	size     int
	pos      uint64
	consumed uint64 // the node's consumed position, as last READ
}

// reserve returns the position of a record of length bytes and, when the
// record does not fit before the end of the lap, the position of the
// skip record to write first (skip is false otherwise). It returns
// ok false when the ring has no room until consumed moves to need.
func (w *ringWriter) reserve(length int) (pos, skipAt uint64, skip bool, need uint64, ok bool) {
	p := w.pos
	off := int(p % uint64(w.size))
	if off+length > w.size {
		skipAt, skip = p, true
		p += uint64(w.size - off)
	}
	end := p + uint64(length)
	if end-w.consumed > uint64(w.size) {
		return 0, 0, false, end - uint64(w.size), false
	}
	w.pos = end
	return p, skipAt, skip, 0, true
}

// putHeader encodes a record header for position pos into b.
func (w *ringWriter) putHeader(b []byte, length int, pos uint64) {
	binary.LittleEndian.PutUint64(b, recordHeader(length, pos, w.size))
}
