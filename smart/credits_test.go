package smart

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// TestCreditsInOrder: lists get credits in arrival order — a small list
// does not slip past a waiting round longer than the limit, which goes
// once nothing is outstanding — and a waiter whose context ends leaves
// the queue to the ones behind it.
func TestCreditsInOrder(t *testing.T) {
	w := &Worker{throttle: NewThrottle(4, true)}
	ctx := context.Background()
	if err := w.acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 3)
	wait := func(n int) {
		go func() {
			if err := w.acquire(ctx, n); err != nil {
				t.Error(err)
			}
			got <- n
		}()
		for end := time.Now().Add(time.Second); ; { // until it queued
			if time.Now().After(end) {
				t.Fatalf("the list of %d never queued", n)
			}
			w.mu.Lock()
			k := len(w.queue)
			queued := k > 0 && w.queue[k-1].n == n
			w.mu.Unlock()
			if queued {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait(8) // longer than the limit: waits for the 3 outstanding
	wait(1) // fits in the credit left, but queues behind the 8
	select {
	case n := <-got:
		t.Fatalf("the list of %d got credits before any came back", n)
	case <-time.After(20 * time.Millisecond):
	}
	release := func(n int) {
		w.mu.Lock()
		w.throttle.Release(n)
		w.grant()
		w.mu.Unlock()
	}
	release(3)
	if n := <-got; n != 8 {
		t.Fatalf("first served: %d, want the round of 8", n)
	}
	select {
	case n := <-got:
		t.Fatalf("the list of %d got credits while the 8 are outstanding", n)
	case <-time.After(20 * time.Millisecond):
	}
	release(8)
	if n := <-got; n != 1 {
		t.Fatalf("second served: %d, want 1", n)
	}
	// A waiter whose context ends gives its place up.
	if err := w.acquire(ctx, 3); err != nil { // 4 outstanding now
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := w.acquire(c, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire past its context: %v", err)
	}
	w.mu.Lock()
	left := len(w.queue)
	w.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiters left after the context ended", left)
	}
	// Closing fails the waiters.
	done := make(chan error, 1)
	go func() { done <- w.acquire(ctx, 4) }()
	for {
		w.mu.Lock()
		k := len(w.queue)
		if k > 0 {
			w.closed = true
			w.failWaiters()
		}
		w.mu.Unlock()
		if k > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-done; !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("a waiter at close: %v, want ErrClosed", err)
	}
}
