package nic

import (
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// sqEntry is a send work request waiting in a QP's deferred queue.
type sqEntry struct {
	wr      verbs.SendWR
	seq     uint64
	inline  []byte        // the payload copied at post time, for INLINE requests
	pre     verbs.Status  // a failure decided at post time, reported in order
	due     time.Duration // when to try next, on the package clock
	start   time.Duration // first attempt, for the retry budget (local mode)
	rnrLeft int           // RNR retries left; -1 forever
}

// sendQueue is the ring of deferred send requests. Its scatter lists and
// inline payloads live in flat arrays allocated with the QP.
type sendQueue struct {
	ent    []sqEntry
	sges   []verbs.SGE
	inl    []byte
	maxSGE int
	maxInl int
	head   uint64
	tail   uint64
}

func (s *sendQueue) init(depth, maxSGE, maxInline int) {
	s.ent = make([]sqEntry, depth)
	s.sges = make([]verbs.SGE, depth*maxSGE)
	s.inl = make([]byte, depth*maxInline)
	s.maxSGE = maxSGE
	s.maxInl = maxInline
}

func (s *sendQueue) len() int { return int(s.tail - s.head) }

func (s *sendQueue) front() *sqEntry { return s.at(s.head) }

// at is the entry with absolute index i (head ≤ i < tail).
func (s *sendQueue) at(i uint64) *sqEntry { return &s.ent[i%uint64(len(s.ent))] }

func (s *sendQueue) pop() {
	e := s.front()
	e.wr.AH = nil
	s.head++
}

// push copies wr into the ring (its scatter list into the ring's own
// storage) and returns the entry and the entry's inline storage. The
// caller has checked there is room.
func (s *sendQueue) push(wr *verbs.SendWR) (*sqEntry, []byte) {
	slot := int(s.tail % uint64(len(s.ent)))
	e := &s.ent[slot]
	sg := s.sges[slot*s.maxSGE : (slot+1)*s.maxSGE]
	e.wr = *wr
	e.wr.SGL = sg[:copy(sg, wr.SGL)]
	e.inline = nil
	e.pre = verbs.StatusSuccess
	s.tail++
	return e, s.inl[slot*s.maxInl : (slot+1)*s.maxInl]
}

func (s *sendQueue) clear() {
	for s.len() > 0 {
		s.pop()
	}
}

var clockBase = time.Now()

// now is the package clock: monotonic time since start.
func now() time.Duration { return time.Since(clockBase) }
