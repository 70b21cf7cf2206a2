package nic

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
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

// resolveLocal resolves a local scatter list into q.exec.lbuf and q.exec.lmr,
// acquiring each region. dst says the memory is written (needs
// AccessLocalWrite). inline says the list is an INLINE payload, which
// needs no lkey: an entry whose lkey names no region of the QP's PD is
// looked up by address among the PD's regions. Zero-length entries are
// skipped.
func (q *QP) resolveLocal(sgl []verbs.SGE, dst, inline bool) (int, verbs.Status) {
	n := 0
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := q.node.keys.local(s.LKey)
		if inline && (m == nil || m.pd != q.pd) {
			m = q.node.keys.containing(q.pd, s.Addr, uint64(s.Length))
		}
		if m == nil || m.pd != q.pd || (dst && m.reg.Access&verbs.AccessLocalWrite == 0) || !m.acquire() {
			q.releaseLocal(n)
			return 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			m.release()
			q.releaseLocal(n)
			return 0, verbs.StatusLocProtErr
		}
		q.exec.lbuf[n], q.exec.lmr[n] = b, m
		n++
	}
	return n, verbs.StatusSuccess
}

func (q *QP) releaseLocal(n int) {
	for i := 0; i < n; i++ {
		q.exec.lmr[i].release()
	}
}

// payload resolves the bytes a SEND or WRITE carries: the inline copy or
// the local scatter list. It returns the number of q.exec.lbuf entries, how
// many of them hold region references, and the total length.
func (q *QP) payload(wr *verbs.SendWR, inline []byte) (nbuf, nref int, total uint64, st verbs.Status) {
	if inline != nil {
		q.exec.lbuf[0] = inline
		return 1, 0, uint64(len(inline)), verbs.StatusSuccess
	}
	n, st := q.resolveLocal(wr.SGL, false, wr.Flags&verbs.FlagInline != 0)
	if st != verbs.StatusSuccess {
		return 0, 0, 0, st
	}
	for i := 0; i < n; i++ {
		total += uint64(len(q.exec.lbuf[i]))
	}
	return n, n, total, verbs.StatusSuccess
}

// scratch holds a responder's resolved receive scatter list, so delivery
// allocates nothing. Its owner serialises its use.
type scratch struct {
	rbuf [maxSGE][]byte
	rmr  [maxSGE]*MR
}

// resolveRecv resolves a receive's scatter list on the responder node into
// sc.rbuf and sc.rmr, returning the entry count and the capacity in bytes.
func (sc *scratch) resolveRecv(dq *QP, sgl []verbs.SGE) (int, uint64, verbs.Status) {
	n := 0
	var capacity uint64
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := dq.node.keys.local(s.LKey)
		if m == nil || m.pd != dq.pd || m.reg.Access&verbs.AccessLocalWrite == 0 || !m.acquire() {
			sc.releaseRecv(n)
			return 0, 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			m.release()
			sc.releaseRecv(n)
			return 0, 0, verbs.StatusLocProtErr
		}
		sc.rbuf[n], sc.rmr[n] = b, m
		capacity += uint64(len(b))
		n++
	}
	return n, capacity, verbs.StatusSuccess
}

func (sc *scratch) releaseRecv(n int) {
	for i := 0; i < n; i++ {
		sc.rmr[i].release()
	}
}

// resolveLocalDirect is resolveLocal for the direct path, which runs with
// q.mu held from start to end: instead of pinning each region with a
// reference it relies on MR.Deregister quiescing every QP (taking its lock)
// before it unmaps, so a region found here stays mapped until q.mu is
// released. It returns the entry count and their total length.
func (q *QP) resolveLocalDirect(sgl []verbs.SGE, dst, inline bool) (n int, total uint64, st verbs.Status) {
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := q.node.keys.local(s.LKey)
		if inline && (m == nil || m.pd != q.pd) {
			m = q.node.keys.containing(q.pd, s.Addr, uint64(s.Length))
		}
		if m == nil || m.pd != q.pd || (dst && m.reg.Access&verbs.AccessLocalWrite == 0) || m.gone.Load() {
			return 0, 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			return 0, 0, verbs.StatusLocProtErr
		}
		q.exec.lbuf[n] = b
		total += uint64(len(b))
		n++
	}
	return n, total, verbs.StatusSuccess
}

// shape is what a request's scatter list holds.
type shape uint8

const (
	shapeNone    shape = iota // nothing: an INDIRECT_ARG WRITE, a REDIRECT READ
	shapePayload              // the bytes it carries: SEND, WRITE, ALLOCATE
	shapeSink                 // where its answer lands: READ, the atomics
)

// shapeOf is the shape of a request's scatter list.
func shapeOf(op verbs.Opcode, flags verbs.SendFlags) shape {
	if flags&(verbs.FlagIndirectArg|verbs.FlagRedirect) != 0 && !op.IsAtomic() && op != verbs.OpAllocate {
		return shapeNone
	}
	if op == verbs.OpRead || op.IsAtomic() {
		return shapeSink
	}
	return shapePayload
}

// listLen is the total length of a list of buffers.
func listLen(l [][]byte) uint64 {
	var n uint64
	for _, b := range l {
		n += uint64(len(b))
	}
	return n
}
