package nic

import (
	"testing"
	"time"
)

// The retransmission state on its own: no QP, no link, no clock.

func TestRetxWindow(t *testing.T) {
	var r retx
	if r.onWire(0) || r.sent(0) != 0 {
		t.Fatalf("fresh: onWire=%v sent=%d", r.onWire(0), r.sent(0))
	}
	r.transmitted(0, 3, 7)
	if !r.onWire(0) || r.sent(0) != 3 || r.since != 7 {
		t.Fatalf("after 3 sent: onWire=%v sent=%d since=%d", r.onWire(0), r.sent(0), r.since)
	}
	// Requests completed without the wire (failed at post) move the head
	// past next: sent follows the head.
	if r.sent(5) != 5 || r.onWire(5) {
		t.Fatalf("head past next: sent=%d onWire=%v", r.sent(5), r.onWire(5))
	}
}

func TestRetxTimerStartsWithTheOldest(t *testing.T) {
	var r retx
	r.transmitted(0, 1, 10)
	r.transmitted(0, 2, 20) // joins a wire already busy: the oldest's wait goes on
	if r.since != 10 {
		t.Fatalf("since=%d, want 10 (the oldest's)", r.since)
	}
	r.answered(1, 30) // the oldest completed; the next waits from the answer
	if r.since != 30 {
		t.Fatalf("since=%d after an answer, want 30", r.since)
	}
	r.answered(2, 40) // nothing left on the wire: nothing waits
	if r.since != 30 || r.onWire(2) {
		t.Fatalf("since=%d onWire=%v with the wire empty", r.since, r.onWire(2))
	}
	r.transmitted(2, 3, 50)
	if r.since != 50 {
		t.Fatalf("since=%d, want 50 (a new oldest)", r.since)
	}
}

func TestRetxRNRGoesBackN(t *testing.T) {
	var r retx
	r.transmitted(0, 4, 1)
	r.answered(1, 2)
	r.rnr(1, time.Second, 10*time.Millisecond)
	if r.onWire(1) || r.sent(1) != 1 || !r.hold {
		t.Fatalf("after RNR: onWire=%v sent=%d hold=%v; want all unsent, held", r.onWire(1), r.sent(1), r.hold)
	}
	if d := r.holdLeft(time.Second + 4*time.Millisecond); d != 6*time.Millisecond || !r.hold {
		t.Fatalf("holdLeft early = %v hold=%v, want 6ms, held", d, r.hold)
	}
	if d := r.holdLeft(time.Second + 10*time.Millisecond); d != 0 || r.hold {
		t.Fatalf("holdLeft when due = %v hold=%v, want 0, released", d, r.hold)
	}
	r.transmitted(1, 4, 9) // the retry: the oldest waits from its new transmission
	if r.sent(1) != 4 || r.since != 9 {
		t.Fatalf("retry: sent=%d since=%d", r.sent(1), r.since)
	}
}

func TestRetxOverdue(t *testing.T) {
	var tk ticks
	at := func(k uint64, c time.Duration) { // tick k happened at clock c
		tk.times[k%uint64(len(tk.times))] = c
		tk.last = c
		tk.n.Store(k)
	}
	at(1, 0)
	var r retx
	budget := 100 * time.Millisecond
	if r.overdue(0, &tk, budget) {
		t.Fatal("overdue with nothing on the wire")
	}
	r.transmitted(0, 1, 1) // went out after tick 1
	for k := uint64(2); k <= 12; k++ {
		at(k, time.Duration(k-2)*10*time.Millisecond)
	}
	// Age is counted from tick 2 (0 ms) to tick 12 (100 ms): not more
	// than the budget yet.
	if r.overdue(0, &tk, budget) {
		t.Fatal("overdue at exactly the budget")
	}
	at(13, 110*time.Millisecond)
	if !r.overdue(0, &tk, budget) {
		t.Fatal("not overdue past the budget")
	}
	r.rnr(0, 0, time.Millisecond) // held: waits for the RNR timer, not an answer
	if r.overdue(0, &tk, budget) {
		t.Fatal("a held QP is overdue")
	}
	r.holdLeft(time.Millisecond)
	r.transmitted(0, 1, 12) // the retry went out after tick 12
	if r.overdue(0, &tk, budget) {
		t.Fatal("a retry overdue at once")
	}
	r.rnr(0, 0, time.Millisecond)
	r.stop()
	if r.hold {
		t.Fatal("stop left the hold")
	}
}

func TestRetxLost(t *testing.T) {
	var tk ticks
	var r retx
	at := func(k uint64, c time.Duration) {
		tk.times[k%uint64(len(tk.times))] = c
		tk.last = c
		tk.n.Store(k)
	}
	budget := 100 * time.Millisecond
	// Expire's rule: overdue, and lost anyway or on a silent link.
	lost := func(progressed bool) bool {
		return r.overdue(0, &tk, budget) && (r.lostAnyway(&tk, budget) || !progressed)
	}
	const busy, silent = true, false
	at(1, 0)
	r.transmitted(0, 1, 1)
	at(2, 0)
	at(3, 150*time.Millisecond) // overdue: 150 ms of a 100 ms budget
	if lost(busy) {
		t.Fatal("lost on a busy link at 1.5 budgets, without a drop notice")
	}
	if !lost(silent) {
		t.Fatal("not lost on a silent link past the budget")
	}
	r.dropped = true
	if !lost(busy) {
		t.Fatal("a request the responder dropped is not lost past the budget")
	}
	r.answered(0, 3) // an answer: the next request waits afresh, not dropped
	if r.dropped {
		t.Fatal("an answer left the drop notice")
	}
	r.transmitted(0, 1, 3)
	at(4, 150*time.Millisecond) // the wait is counted from the tick after
	at(5, 150*time.Millisecond+lostAfter*budget+time.Millisecond)
	if !lost(busy) {
		t.Fatalf("not lost after %d budgets on a busy link", lostAfter)
	}
}
