package smart

import (
	"context"

	"github.com/rdmakit/rdmakit/verbs"
)

// creditWaiter is a list (or a round) waiting for a worker's credits.
type creditWaiter struct {
	n       int
	ch      chan struct{} // closed when granted or failed
	granted bool
	err     error // set when failed (the runtime closed)
}

// acquire waits for n credits. Waiters are served in arrival order, and
// a list finding others waiting queues behind them even if its own
// credits are there: a round longer than the limit (which goes once
// nothing is outstanding) or a large commit round is not starved by a
// stream of small ones slipping past it while it holds locks.
func (w *Worker) acquire(ctx context.Context, n int) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return verbs.ErrClosed
	}
	if len(w.queue) == 0 && w.throttle.TryAcquire(n) {
		w.mu.Unlock()
		return nil
	}
	q := &creditWaiter{n: n, ch: make(chan struct{})}
	w.queue = append(w.queue, q)
	w.mu.Unlock()
	select {
	case <-q.ch:
		return q.err
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if q.granted { // granted meanwhile: give the credits back
		w.throttle.Release(n)
	} else {
		for i, o := range w.queue {
			if o == q {
				w.queue = append(w.queue[:i], w.queue[i+1:]...)
				break
			}
		}
	}
	w.grant() // the head may have changed
	return ctx.Err()
}

// grant hands credits to the waiters at the head of the queue while
// they fit. The caller holds w.mu.
func (w *Worker) grant() {
	for len(w.queue) > 0 {
		q := w.queue[0]
		if !w.throttle.TryAcquire(q.n) {
			return
		}
		q.granted = true
		close(q.ch)
		w.queue[0] = nil
		w.queue = w.queue[1:]
	}
}

// failWaiters fails every waiter (the runtime closed). The caller holds
// w.mu.
func (w *Worker) failWaiters() {
	for _, q := range w.queue {
		q.err = verbs.ErrClosed
		close(q.ch)
	}
	w.queue = nil
}
