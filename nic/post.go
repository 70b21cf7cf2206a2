package nic

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// PostSend implements verbs.QP. Toward a responder in this process each
// request runs at once on the caller's goroutine unless it must wait (RNR,
// a delayed or blocked path) or an earlier request of the QP is still
// waiting; then it joins the QP's deferred queue, drained in order by a
// background goroutine. Toward another process the requests are queued on
// the QP's link in order and sent with one flush per post list; they
// complete as the responses arrive.
func (q *QP) PostSend(wrs []verbs.SendWR) error {
	q.mu.lockPoster()
	if len(wrs) == 1 && q.postFast(&wrs[0]) {
		if len(q.link.flushing) == 0 && !q.retx.full { // pumpAndUnlock's test, without the call
			q.mu.Unlock()
		} else {
			q.pumpAndUnlock()
		}
		return nil
	}
	err := q.postLocked(wrs)
	if q.conn.destLink != nil && q.typ == verbs.RC && q.send.sq.len() > 0 {
		// (An empty queue has nothing to transmit: the direct path
		// completed everything.)
		q.transmitLocked()
	}
	q.pumpAndUnlock()
	return err
}

func (q *QP) postLocked(wrs []verbs.SendWR) error {
	if s := q.State(); s != verbs.StateRTS && s != verbs.StateError {
		return &verbs.PostError{Err: fmt.Errorf("%w: post send in %v", verbs.ErrInvalidState, s)}
	}
	remote := q.typ == verbs.RC && q.conn.destLink != nil // transmitted by PostSend
	for i := range wrs {
		wr := &wrs[i]
		if err := q.validate(wr); err != nil {
			return &verbs.PostError{Index: i, Err: err}
		}
		if q.send.posted-q.send.reaped.Load() >= uint64(q.cap.MaxSendWR) && !q.syncReaped() {
			return &verbs.PostError{Index: i, Err: verbs.ErrQueueFull}
		}
		q.send.posted++
		seq := q.send.posted
		if q.State() == verbs.StateError {
			q.completeLocked(wr, seq, verbs.StatusWRFlushErr, 0)
			continue
		}
		if remote {
			if wr.Flags&verbs.FlagConditional != 0 && q.send.sq.len() == 0 {
				// Nothing earlier is outstanding: decide here.
				if !q.send.prevOK {
					q.completeLocked(wr, seq, verbs.StatusSkipped, 0)
					continue
				}
				q.send.cond = *wr
				q.send.cond.Flags &^= verbs.FlagConditional
				wr = &q.send.cond
			}
			if q.conn.direct != nil && q.send.sq.len() == 0 && oneSided(wr) {
				if st, n, ok := q.execDirect(wr); ok {
					q.completeLocked(wr, seq, st, n)
					continue
				}
			}
			if q.conn.direct != nil && q.send.sq.len() == 0 && depositable(wr) {
				if st, n, ok := q.execDeposit(wr); ok { // requester_deposit.go
					q.completeLocked(wr, seq, st, n)
					continue
				}
			}
			q.enqueue(wr, seq, 0) // goes out with transmitLocked, which stamps it
			continue
		}
		costed := false
		if q.conn.destNode != nil && q.typ == verbs.RC {
			if cs := q.conn.destNode.cost.Load(); cs != nil {
				q.conn.cost.Store(cs)
				cs.outstanding.Add(1)
				costed = true
			}
		}
		if q.typ == verbs.UD {
			if l := wr.AH.(*AH).link; l != nil {
				q.sendDatagram(wr, seq, l)
				continue
			}
		}
		if q.send.sq.len() == 0 && q.skipLocked(wr) {
			q.completeLocked(wr, seq, verbs.StatusSkipped, 0)
			continue
		}
		r := q.route(wr)
		if q.send.sq.len() > 0 || r.State != PathUp || r.Delay > 0 || costed {
			// A node with a cost model serves requests as a NIC would:
			// later, on its own pipeline, while the poster goes on.
			q.deferLocked(wr, seq, 2*r.Delay)
			continue
		}
		st, n, rnr := q.execute(wr, nil)
		if rnr {
			if q.conn.rnrRetry == 0 {
				q.completeLocked(wr, seq, rnrExhausted(wr.Opcode), 0)
				continue
			}
			e := q.deferLocked(wr, seq, q.conn.minRNR)
			if e.rnrLeft > 0 {
				e.rnrLeft--
			}
			continue
		}
		q.completeLocked(wr, seq, st, n)
	}
	return nil
}

// syncReaped brings reaped up to the last polled completion and reports
// whether the send queue has room now.
func (q *QP) syncReaped() bool {
	q.reap(atomic.LoadUint64(&q.send.polled))
	return q.send.posted-q.send.reaped.Load() < uint64(q.cap.MaxSendWR)
}

// validate checks a request's structure at post time.
func (q *QP) validate(wr *verbs.SendWR) error {
	if err := verbs.ValidateSend(wr, &q.limits); err != nil {
		return err
	}
	if q.typ == verbs.UD {
		ah, ok := wr.AH.(*AH)
		if !ok || ah == nil || ah.pd != q.pd {
			return fmt.Errorf("%w: address handle of another device or PD", verbs.ErrInvalidArg)
		}
	}
	return nil
}

// route is the path a request to a responder in this process takes now.
func (q *QP) route(wr *verbs.SendWR) Route {
	if q.node.net == nil {
		return Route{}
	}
	if q.typ == verbs.UD {
		return q.node.net.Route(q.node, wr.AH.(*AH).dest)
	}
	return q.node.net.Route(q.node, q.conn.dest)
}

// deferLocked appends a request to the deferred queue, due after delay,
// and makes sure a drain goroutine runs.
func (q *QP) deferLocked(wr *verbs.SendWR, seq uint64, delay time.Duration) *sqEntry {
	e := q.enqueue(wr, seq, now())
	e.due = e.start + delay
	if !q.send.running {
		q.send.running = true
		go q.drain()
	}
	return e
}

// enqueue copies a request into the send queue, started at start; an
// INLINE payload is copied now, as the flag promises.
func (q *QP) enqueue(wr *verbs.SendWR, seq uint64, start time.Duration) *sqEntry {
	e, inl := q.send.sq.push(wr)
	e.seq = seq
	e.start = start
	e.rnrLeft = q.conn.rnrRetry
	if wr.Flags&verbs.FlagInline != 0 {
		n, st := q.resolveLocal(wr.SGL, false, true)
		if st != verbs.StatusSuccess {
			e.pre = st
		} else {
			e.inline = inl[:gather(inl, q.exec.lbuf[:n])]
			q.releaseLocal(n)
		}
	}
	return e
}

// drain executes the deferred queue in order until it is empty.
func (q *QP) drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		s := q.State()
		if q.send.sq.len() == 0 || (s != verbs.StateRTS && s != verbs.StateError) {
			q.send.running = false
			return
		}
		e := q.send.sq.front()
		t := now()
		if e.due > t {
			q.mu.Unlock()
			time.Sleep(e.due - t)
			q.mu.Lock()
			continue
		}
		st, n, done := q.attempt(e, t)
		if !done {
			continue
		}
		wr := e.wr // copy: popping the entry frees its slot
		q.send.sq.pop()
		q.completeLocked(&wr, e.seq, st, n)
	}
}

// attempt tries a deferred request once. It returns done=false with e.due
// moved forward when the request must wait again.
func (q *QP) attempt(e *sqEntry, t time.Duration) (verbs.Status, uint32, bool) {
	if e.pre != verbs.StatusSuccess {
		return e.pre, 0, true
	}
	if q.skipLocked(&e.wr) {
		return verbs.StatusSkipped, 0, true
	}
	r := q.route(&e.wr)
	switch r.State {
	case PathDead:
		if q.typ == verbs.UD {
			return verbs.StatusSuccess, 0, true // datagrams to nowhere vanish
		}
		return verbs.StatusRetryExcErr, 0, true
	case PathBlocked:
		if q.typ == verbs.UD {
			return verbs.StatusSuccess, 0, true
		}
		if t-e.start >= q.conn.retryBudget {
			return verbs.StatusRetryExcErr, 0, true
		}
		e.due = t + min(q.conn.retryBudget/32+time.Microsecond, time.Millisecond)
		return 0, 0, false
	}
	st, n, rnr := q.execute(&e.wr, e.inline)
	if !rnr {
		return st, n, true
	}
	if e.rnrLeft == 0 {
		return rnrExhausted(e.wr.Opcode), 0, true
	}
	if e.rnrLeft > 0 {
		e.rnrLeft--
	}
	e.due = t + q.conn.minRNR
	return 0, 0, false
}

// completeLocked generates the requester's completion: always for errors,
// for successes only when signaled. An error, or a completion lost to a
// full CQ, moves the QP to ERROR.
func (q *QP) completeLocked(wr *verbs.SendWR, seq uint64, st verbs.Status, n uint32) {
	q.send.prevOK = st == verbs.StatusSuccess && !q.send.failedCmp
	q.send.failedCmp = false
	result := q.send.result
	q.send.result = 0
	if (st == verbs.StatusSuccess || st == verbs.StatusSkipped) && wr.Flags&verbs.FlagSignaled == 0 && !q.sigAll {
		return
	}
	failed := st != verbs.StatusSuccess && st != verbs.StatusSkipped
	entering := false
	if failed && q.State() != verbs.StateError {
		// ERROR before the completion is visible: a poller that takes it
		// (without the CQ's lock, solo.go) and queries the QP sees ERROR.
		q.state.Store(uint32(verbs.StateError))
		q.published()
		entering = true
	}
	ok := q.send.cq.pushSend(wr.ID, st, verbs.WCOpcodeOf(wr.Opcode), n, result, q, seq)
	if entering || (!ok && q.State() != verbs.StateError) {
		q.errorLocked()
	}
}

// rnrExhausted is the status of a request whose RNR retries ran out: an
// ALLOCATE that kept finding its free list empty fails with REM_OP_ERR, a
// SEND that kept finding no receive with RNR_RETRY_EXC_ERR.
func rnrExhausted(op verbs.Opcode) verbs.Status {
	if op == verbs.OpAllocate {
		return verbs.StatusRemOpErr
	}
	return verbs.StatusRNRRetryExcErr
}
