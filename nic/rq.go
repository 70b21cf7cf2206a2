package nic

import (
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// recvQueue is a ring of posted receives, used by a QP's own receive
// queue and by SRQs. The scatter lists live in one flat array so posting
// allocates nothing.
type recvQueue struct {
	mu     sync.Mutex
	ids    []uint64
	nsge   []uint8
	sges   []verbs.SGE // depth × maxSGE
	maxSGE int
	head   uint64 // next to consume
	tail   uint64 // next free
	// dep is set when the queue is published for direct deposit
	// (deposit.go): consumers then take it with lock, not mu alone.
	dep *depositState
}

func (r *recvQueue) init(depth, maxSGE int) {
	r.ids = make([]uint64, depth)
	r.nsge = make([]uint8, depth)
	r.sges = make([]verbs.SGE, depth*maxSGE)
	r.maxSGE = maxSGE
}

// post appends receives; the caller holds r.mu.
func (r *recvQueue) post(wrs []verbs.RecvWR) error {
	from := r.tail
	defer r.publish(from)
	for i := range wrs {
		if err := verbs.ValidateRecv(&wrs[i], r.maxSGE); err != nil {
			return &verbs.PostError{Index: i, Err: err}
		}
		if r.tail-r.head >= uint64(len(r.ids)) && r.dep != nil {
			// Deposits may have consumed some. Under the area's lock: a
			// depositor publishes a receive's completion before it records
			// the receive consumed, both under that lock, so a receive
			// whose completion was already polled (and is being posted
			// again) may not be recorded yet until the depositor lets go.
			r.dep.area.Lock()
			r.head = r.dep.area.Consumed(r.head, r.tail)
			r.dep.area.Unlock()
		}
		if r.tail-r.head >= uint64(len(r.ids)) {
			return &verbs.PostError{Index: i, Err: verbs.ErrQueueFull}
		}
		slot := int(r.tail % uint64(len(r.ids)))
		r.ids[slot] = wrs[i].ID
		r.nsge[slot] = uint8(copy(r.sges[slot*r.maxSGE:(slot+1)*r.maxSGE], wrs[i].SGL))
		r.tail++
	}
	return nil
}

// peek returns the oldest receive without consuming it; the caller holds
// r.mu.
func (r *recvQueue) peek() (id uint64, sgl []verbs.SGE, ok bool) {
	if r.head == r.tail {
		return 0, nil, false
	}
	slot := int(r.head % uint64(len(r.ids)))
	return r.ids[slot], r.sges[slot*r.maxSGE : slot*r.maxSGE+int(r.nsge[slot])], true
}

// pop consumes the oldest receive; the caller holds the queue (lock).
func (r *recvQueue) pop() {
	r.head++
	if r.dep != nil {
		r.dep.area.SetConsumed(r.head)
	}
}

// len is the number of posted receives; the caller holds r.mu.
func (r *recvQueue) len() int { return int(r.tail - r.head) }

// SRQ is a shared receive queue; it implements verbs.SRQ.
type SRQ struct {
	pd    *PD
	rq    recvQueue
	users int // QPs attached, guarded by rq.mu
	dead  bool
}

var _ verbs.SRQ = (*SRQ)(nil)

// PostRecv implements verbs.SRQ.
func (s *SRQ) PostRecv(wrs []verbs.RecvWR) error {
	s.rq.mu.Lock()
	defer s.rq.mu.Unlock()
	if s.dead || s.pd.node.closed.Load() {
		return &verbs.PostError{Err: verbs.ErrClosed}
	}
	return s.rq.post(wrs)
}

// Len returns the number of receives posted and not yet consumed.
func (s *SRQ) Len() int {
	s.rq.lock()
	defer s.rq.unlock()
	return s.rq.len()
}

// Destroy implements verbs.SRQ.
func (s *SRQ) Destroy() error {
	s.rq.mu.Lock()
	if s.users > 0 {
		s.rq.mu.Unlock()
		return verbs.ErrBusy
	}
	if s.dead {
		s.rq.mu.Unlock()
		return verbs.ErrInvalidState
	}
	s.dead = true
	s.pd.srqs.Add(-1)
	s.rq.mu.Unlock()
	s.pd.node.unpublishRecv(&s.rq)
	return nil
}
