package nic

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// TestSingleCQNoticesASecondPoller: a Poll of a single-threaded CQ that
// finds another Poll inside (the promise broken) fails instead of taking
// completions twice.
func TestSingleCQNoticesASecondPoller(t *testing.T) {
	n := NewNode(Config{Address: "test://single", Network: stubNet{}})
	t.Cleanup(func() { n.Close() })
	pd, _ := n.AllocPD()
	cq, err := n.CreateCQEx(verbs.CQInitAttr{Depth: 16, SingleThreaded: true})
	must(t, err)
	c := cq.(*CQ)
	if _, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, SingleThreaded: true}); err != nil {
		t.Fatal(err)
	}
	if c.solo.Load() == nil || !c.single || c.fenceless != membarrierAvailable() {
		t.Fatal("the CQ of one QP is not polled without a lock")
	}
	wc := make([]verbs.WC, 4)
	if _, err := cq.Poll(wc); err != nil {
		t.Fatalf("poll: %v", err)
	}
	c.polling = true // another poller inside
	if _, err := cq.Poll(wc); !errors.Is(err, verbs.ErrInvalidState) {
		t.Fatalf("poll with another poller inside: %v, want ErrInvalidState", err)
	}
	c.polling = false
}

// TestQPLockBias: a SingleThreaded QP's poster enters without the mutex
// while nobody else wants the lock, and waits on the mutex while another
// holder has it.
func TestQPLockBias(t *testing.T) {
	var m qpLock
	m.biased = true
	m.lockPoster()
	if !m.byOwner || !m.mu.TryLock() {
		t.Fatal("the poster took the mutex on an uncontended biased lock")
	}
	m.mu.Unlock()
	m.Unlock()
	m.Lock() // another holder
	var released atomic.Bool
	done := make(chan struct{})
	go func() {
		m.lockPoster()
		if !released.Load() {
			t.Error("the poster entered while another holder had the lock")
		}
		m.Unlock()
		close(done)
	}()
	time.Sleep(10 * time.Millisecond) // let the poster try
	released.Store(true)
	m.Unlock()
	<-done
}
