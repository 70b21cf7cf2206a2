package nic

import "time"

// retx is a link requester's retransmission state over its send queue
// (go-back-N, as RC does). It has no locks, reads no clock and does no
// I/O: the QP feeds it queue indexes, expiry ticks and times, under q.mu
// (requester_link.go). The requests with index in [head, sent) are on the
// wire and are answered in order; an RNR answer makes everything from the
// oldest on unsent again and holds transmission for the RNR timer; the
// oldest request on the wire times out once it has waited longer than the
// retry budget, counting from when it went out or from the last answer,
// whichever is later (a slow responder is not a dead one).
type retx struct {
	next   uint64        // the first request not on the wire, unless the queue's head passed it
	since  uint64        // the expiry tick from which the oldest request on the wire has waited
	hold   bool          // an RNR answer holds transmission ...
	due    time.Duration // ... until then, on the package clock
	fenced bool          // transmission stopped at a FENCE request until earlier READs and atomics complete
	full   bool          // the link refused a request: transmit more after a flush
	// dropped: the responder discarded the oldest request on the wire
	// unanswered (nic.RespDrop: its QP is gone, or is not connected to
	// this one). It fails at the retry budget, however busy the link.
	dropped bool
}

// sent is the index of the first request not on the wire, for a send
// queue whose oldest request is head.
func (r *retx) sent(head uint64) uint64 { return max(r.next, head) }

// onWire reports whether a request is on the wire.
func (r *retx) onWire(head uint64) bool { return head < r.sent(head) }

// transmitted records that the requests from sent(head) up to to
// (excluded) went on the wire at tick t.
func (r *retx) transmitted(head, to, t uint64) {
	if to > head && !r.onWire(head) {
		r.since = t // the oldest starts waiting now
		r.dropped = false
	}
	r.next = to
}

// answered records an answer that completed the oldest request on the
// wire at tick t; head is the queue's new head. The next request's wait
// starts again, as an RC acknowledgement restarts the transport timer.
func (r *retx) answered(head, t uint64) {
	r.dropped = false
	if r.onWire(head) {
		r.since = t
	}
}

// rnr records an RNR answer for the oldest request on the wire (at head)
// at time now: it and every later request are unsent again (the
// responder discards them until the retry arrives), and transmission
// holds for wait.
func (r *retx) rnr(head uint64, now, wait time.Duration) {
	r.next = head
	r.dropped = false
	r.hold = true
	r.due = now + wait
}

// holdLeft is how long the RNR hold still lasts at time now; once it has
// run out the hold ends and holdLeft is 0.
func (r *retx) holdLeft(now time.Duration) time.Duration {
	if !r.hold {
		return 0
	}
	if d := r.due - now; d > 0 {
		return d
	}
	r.hold = false
	return 0
}

// overdue reports whether the oldest request on the wire has waited
// longer than budget by the clock t. A held QP waits for its RNR timer,
// not for an answer: it is never overdue.
func (r *retx) overdue(head uint64, t *ticks, budget time.Duration) bool {
	return r.onWire(head) && !r.hold && t.age(r.since) > budget
}

// stop ends the hold: the QP was reset or failed, and its queue emptied.
func (r *retx) stop() { r.hold, r.dropped = false, false }

// lostAfter is how many retry budgets a request may wait on a link that
// moves other QPs' answers: past it, it is lost (RETRY_EXC_ERR) however
// busy the link. A responder starved of CPU answers no QP, so its link
// falls silent and the request fails at about twice the budget instead;
// one that answers other QPs and not this one lost the request (its QP
// is gone), which RC's per-QP retry timer finds.
const lostAfter = 4

// lostAnyway reports whether the oldest request on the wire, overdue, is
// lost even on a link that moves other QPs' answers: the responder said
// it dropped it, or it waited lostAfter budgets.
func (r *retx) lostAnyway(t *ticks, budget time.Duration) bool {
	return r.dropped || t.age(r.since) > lostAfter*budget
}
