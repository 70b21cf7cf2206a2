package nic

import (
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

// scratchBytes is the QP's scratch area (verbs.ScratchBase), which its
// RC peer reads and writes through REDIRECT, INDIRECT_ARG and plain
// READs and WRITEs.
func (q *QP) scratchBytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&q.scratch[0])), verbs.ScratchSize)
}

// clearScratch zeroes the scratch area for a new connection.
func (q *QP) clearScratch() {
	for i := range q.scratch {
		atomic.StoreUint64(&q.scratch[i], 0)
	}
}

// redirectRead runs a REDIRECT READ at responder dq: n bytes at addr
// (followed if INDIRECT) copied to redirect. It returns the bytes moved.
func redirectRead(dq *QP, rkey uint32, addr, n uint64, flags verbs.SendFlags, redirect uint64) (verbs.Status, uint32) {
	m, src, st := resolveTarget(dq, rkey, addr, n, flags, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st, 0
	}
	m2, dst, st := resolveArea(dq, rkey, redirect, uint64(len(src)), verbs.AccessRemoteWrite)
	if st == verbs.StatusSuccess {
		copy(dst, src)
	}
	m.release()
	m2.release()
	return st, uint32(len(src))
}

// argWrite runs an INDIRECT_ARG WRITE at responder dq: n bytes at arg
// copied to addr (followed if INDIRECT).
func argWrite(dq *QP, rkey uint32, addr, n uint64, flags verbs.SendFlags, arg uint64) verbs.Status {
	m, src, st := resolveArea(dq, rkey, arg, n, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st
	}
	m2, dst, st := resolveTarget(dq, rkey, addr, n, flags, verbs.AccessRemoteWrite)
	if st == verbs.StatusSuccess {
		copy(dst, src)
	}
	m.release()
	m2.release()
	return st
}

// loadArg loads an INDIRECT_ARG atomic's swap (or add) operand, size
// bytes at arg, into a.
func loadArg(dq *QP, rkey uint32, arg, size uint64, a *verbs.AtomicArgs) verbs.Status {
	m, b, st := resolveArea(dq, rkey, arg, size, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st
	}
	for i := uint64(0); i < size/8; i++ {
		a.Swap[i] = atomic.LoadUint64(word(b[8*i:]))
	}
	m.release()
	return verbs.StatusSuccess
}
