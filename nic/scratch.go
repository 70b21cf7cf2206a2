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
	return unsafe.Slice((*byte)(unsafe.Pointer(&q.resp.scratch[0])), verbs.ScratchSize)
}

// clearScratch zeroes the scratch area for a new connection.
func (q *QP) clearScratch() {
	for i := range q.resp.scratch {
		atomic.StoreUint64(&q.resp.scratch[i], 0)
	}
}
