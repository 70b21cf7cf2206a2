package tcp

import (
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// A served connection that delivered a message to this node's
// application, and carries this node's own requests too, waits a moment
// before it writes the acknowledgement: if the application answers the
// message at once (an echo, an RPC), the answer's request goes in the same
// write (takeRequests), and the peer reads the acknowledgement and the
// answer together. The wait is a few yields, bounded by answerWait, and
// only while such answers keep coming in time (answerScore).

// answerWait bounds the wait for an answer before an acknowledgement is
// written.
const answerWait = 20 * time.Microsecond

// answerScore decides whether to wait for answers: it stops after
// answerMisses deliveries in a row went unanswered in time, and then tries
// once every answerRetry deliveries.
type answerScore struct {
	misses  int
	skipped int
}

const (
	answerMisses = 4
	answerRetry  = 64
)

// try reports whether to wait for an answer to this delivery.
func (a *answerScore) try() bool {
	if a.misses < answerMisses {
		return true
	}
	a.skipped++
	if a.skipped >= answerRetry {
		a.skipped = 0
		return true
	}
	return false
}

// record counts whether the wait saw an answer.
func (a *answerScore) record(hit bool) {
	if hit {
		a.misses = 0
	} else {
		a.misses = min(a.misses+1, answerMisses)
	}
}

// delivers reports whether a request hands a message to the application:
// a SEND or a WRITE_WITH_IMM.
func delivers(r *nic.Request) bool {
	switch r.Opcode {
	case verbs.OpSend, verbs.OpSendWithImm, verbs.OpWriteWithImm:
		return true
	}
	return false
}

// awaitAnswer gives the application a moment to answer the messages just
// delivered on this connection, when this node's requests go on it too.
func (s *conn) awaitAnswer() {
	l := s.link.Load()
	if l == nil || !s.answers.try() {
		return
	}
	// Only this goroutine takes the routed link's responses, so pending
	// grows only by new requests meanwhile.
	l.mu.Lock()
	l.gather = true // until takeRequests, which the flush that follows runs
	l.mu.Unlock()
	p0 := l.pending.Load()
	start := nanotime()
	for l.pending.Load() == p0 && nanotime()-start < int64(answerWait) {
		runtime.Gosched()
	}
	s.answers.record(l.pending.Load() != p0)
}

// takeRequests moves the requests queued on the link routed through this
// connection, if no write of theirs is under way, into the write of
// replies about to happen, and ends the link's gather; s.wmu is held.
func (s *conn) takeRequests() {
	l := s.link.Load()
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	gathered := l.gather
	l.gather = false
	if l.writing || len(l.out) == 0 || l.dead || l.dev.blocked(l.address) {
		return
	}
	if len(s.out)+len(l.out) > cap(s.out) {
		if gathered {
			// Too large to share this write: its posters left them to it,
			// so they get a write of their own.
			go l.Flush()
		}
		return
	}
	s.out = append(s.out, l.out...)
	l.out = l.out[:0]
	l.queued = 0
	l.cond.Broadcast() // posters waiting for room in out
}
