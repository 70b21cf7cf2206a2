package nic

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// freeLists are a region's PRISM free lists (verbs.FreeLists): stacks of
// buffer addresses per queue, popped by ALLOCATE.
type freeLists struct {
	mu     sync.Mutex
	queues map[uint32]*freeList
}

type freeList struct {
	size  uint32
	addrs []uint64
}

var _ verbs.FreeLists = (*MR)(nil)

// PostFree implements verbs.FreeLists.
func (m *MR) PostFree(queue uint32, size uint32, addrs ...uint64) error {
	if m.gone.Load() {
		return fmt.Errorf("%w: MR deregistered", verbs.ErrInvalidState)
	}
	if size == 0 {
		return fmt.Errorf("%w: buffer size 0", verbs.ErrInvalidArg)
	}
	for _, a := range addrs {
		if _, ok := m.slice(a, uint64(size)); !ok {
			return fmt.Errorf("%w: buffer %#x+%d outside the region", verbs.ErrInvalidArg, a, size)
		}
	}
	f := &m.free
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queues == nil {
		f.queues = map[uint32]*freeList{}
	}
	l := f.queues[queue]
	if l == nil {
		l = &freeList{size: size}
		f.queues[queue] = l
	}
	if l.size != size {
		return fmt.Errorf("%w: queue %d holds %d-byte buffers, not %d", verbs.ErrInvalidArg, queue, l.size, size)
	}
	l.addrs = append(l.addrs, addrs...)
	return nil
}

// FreeLen implements verbs.FreeLists.
func (m *MR) FreeLen(queue uint32) int {
	f := &m.free
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.queues[queue]; l != nil {
		return len(l.addrs)
	}
	return 0
}

// Quiesce implements verbs.FreeLists: it waits for an instant at which no
// operation holds the region (every execution holds it from the lookup of
// its rkey to its end), so every operation that began before the call has
// finished. Executions are short; on a region busy without pause it keeps
// looking, yielding, then sleeping in short steps.
func (m *MR) Quiesce() {
	for i := 0; m.refs.Load() > 0; i++ {
		switch {
		case i < 64:
			runtime.Gosched()
		default:
			time.Sleep(5 * time.Microsecond)
		}
	}
	if f := m.pd.node.quiesce; f != nil {
		f()
	}
}

// pop takes a buffer of queue for an n-byte payload.
func (m *MR) pop(queue uint32, n uint64) (uint64, verbs.Status) {
	f := &m.free
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.queues[queue]
	if l == nil || len(l.addrs) == 0 {
		return 0, verbs.StatusRemOpErr
	}
	if n > uint64(l.size) {
		return 0, verbs.StatusRemInvReqErr
	}
	a := l.addrs[len(l.addrs)-1]
	l.addrs = l.addrs[:len(l.addrs)-1]
	return a, verbs.StatusSuccess
}

// respondAllocate runs an ALLOCATE at responder dq: a buffer of queue in
// the region of rkey receives the payload (total bytes); its address goes
// to redirect (with FlagRedirect) or is returned.
func respondAllocate(dq *QP, rkey uint32, queue uint32, flags verbs.SendFlags, redirect uint64, payload [][]byte, total uint64) (verbs.Status, uint64) {
	m := dq.node.keys.remote(rkey)
	if m == nil || !m.reg.grants(dq.pd.id, verbs.Access(dq.resp.access.Load()), verbs.AccessRemoteWrite) || !m.acquire() {
		return verbs.StatusRemAccessErr, 0
	}
	if !receiving(dq) { // fenced since the caller looked (resolveRemote)
		m.release()
		return verbs.StatusRetryExcErr, 0
	}
	defer m.release()
	addr, st := m.pop(queue, total)
	if st != verbs.StatusSuccess {
		return st, 0
	}
	b, _ := m.slice(addr, total)
	gather(b, payload)
	if flags&verbs.FlagRedirect == 0 {
		return verbs.StatusSuccess, addr
	}
	mem := memory{dq: dq, lk: dq.node.locks}
	m2, out, st := mem.area(rkey, redirect, 8, verbs.AccessRemoteWrite)
	if st != verbs.StatusSuccess {
		// The buffer goes back: nobody learned its address.
		m.free.mu.Lock()
		l := m.free.queues[queue]
		l.addrs = append(l.addrs, addr)
		m.free.mu.Unlock()
		return st, 0
	}
	store8(out, addr)
	m2.release()
	return verbs.StatusSuccess, 0
}
