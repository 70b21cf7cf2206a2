package smart

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// A List is one post list of a round: requests to one node, posted with
// one doorbell.
type List struct {
	Node int
	WRs  []verbs.SendWR
}

// maxSignal is the most requests one signaled request accounts for: the
// wr_id's size field is 8 bits. A longer list is signaled every
// maxSignal requests (still one post).
const maxSignal = 0xff

// DoAll posts lists — to several nodes, a list per node say — each on
// the worker's QP to its node under the worker's credits (the round
// waits for the credits of all its lists, as Do's list does for its
// own, and then every list goes out at once), and parks until every one
// completed: one round trip for the
// lot when credits allow. Lists may be of any length (each is signaled
// every 255 requests, the credits it returns riding in the wr_ids). It
// returns an error when a list failed to post or completed with an error
// status, once every list posted has completed. When ctx ends first the
// lists stay in flight: Wait (or WaitFor) before reusing their buffers.
// A list left in flight by an earlier Do or DoAll is waited for first.
func (t *Task) DoAll(ctx context.Context, lists []List) error {
	w := t.w
	owed := 0
	for _, l := range lists {
		if len(l.WRs) == 0 || l.Node < 0 || l.Node >= len(w.qps) {
			return fmt.Errorf("%w: a list of %d requests to node %d", verbs.ErrInvalidArg, len(l.WRs), l.Node)
		}
		owed += signals(len(l.WRs))
	}
	if owed == 0 {
		return nil
	}
	t.drain()
	t.failed.Store(0)
	select {
	case <-t.wake:
	default:
	}
	t.owed.Store(int64(owed))
	// The round's credits are taken at once, so that it goes out whole
	// (one round trip) rather than a list at a time as credits return.
	start, wrs := time.Now(), 0
	for _, l := range lists {
		wrs += len(l.WRs)
	}
	err := w.acquire(ctx, wrs)
	if err != nil {
		t.owed.Store(0)
		return err
	}
	for i, l := range lists {
		t.mark(l.WRs)
		if err = w.post(l.Node, l.WRs); err != nil {
			for _, l := range lists[i:] {
				w.refund(len(l.WRs))
			}
		}
		if err != nil {
			// This list and the ones after it never went out.
			unposted := 0
			for _, l := range lists[i:] {
				unposted += signals(len(l.WRs))
			}
			t.owed.Add(-int64(unposted))
			break
		}
	}
	for t.owed.Load() > 0 {
		select {
		case <-t.wake:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-w.rt.ctx.Done():
			return verbs.ErrClosed
		}
	}
	if err != nil {
		return err
	}
	if s := t.failed.Load(); s != 0 {
		return fmt.Errorf("smart: a list failed: %w", verbs.Status(s-1).Err())
	}
	w.roundTrip(time.Since(start))
	return nil
}

// signals is the signaled requests of a list of n.
func signals(n int) int { return (n + maxSignal - 1) / maxSignal }

// mark sets the wr_ids and flags of a round's list: unsignaled but for
// the last of every maxSignal, whose wr_id carries the count it closes.
func (t *Task) mark(wrs []verbs.SendWR) {
	rt, wid := t.w.rt, t.w.id
	for from := 0; from < len(wrs); from += maxSignal {
		end := min(from+maxSignal, len(wrs))
		for i := from; i < end-1; i++ {
			wrs[i].ID = rt.wrID(t.id, wid, 0)
			wrs[i].Flags &^= verbs.FlagSignaled
		}
		wrs[end-1].ID = rt.wrID(t.id, wid, end-from)
		wrs[end-1].Flags |= verbs.FlagSignaled
	}
}

// settle counts a completion of the DoAll round under way (the poller's
// side): a signaled request's pays one of the round's debts, a failed
// one is remembered; either wakes the task.
func (t *Task) settle(wc verbs.WC) {
	if wc.Status != verbs.StatusSuccess {
		t.failed.CompareAndSwap(0, uint32(wc.Status)+1)
	}
	if wc.ID&0xff != 0 {
		t.owed.Add(-1)
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// WaitFor is Wait bounded by d: it reports whether nothing the task
// posted is left in flight.
func (t *Task) WaitFor(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	if !t.waitRound(timer.C) {
		return false
	}
	for t.pending != 0 {
		select {
		case wc := <-t.done:
			if wc.ID == t.pending || wc.Status != verbs.StatusSuccess {
				t.pending = 0
			}
		case <-t.w.rt.ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
	return true
}

// waitRound waits for the lists a DoAll left in flight, until stop fires
// or the runtime closes; it reports whether none is left.
func (t *Task) waitRound(stop <-chan time.Time) bool {
	for t.owed.Load() > 0 {
		select {
		case <-t.wake:
		case <-t.w.rt.ctx.Done():
			return false
		case <-stop:
			return false
		}
	}
	return true
}

// Post posts a list to node on the worker's QP under its credits and
// does not wait for it: its completion returns the credits and wakes no
// task (fire and forget — a lazy log truncation, say). Later lists the
// worker's tasks post to node go after it on the same QP (RC order).
func (w *Worker) Post(ctx context.Context, l List) error {
	if len(l.WRs) == 0 || l.Node < 0 || l.Node >= len(w.qps) {
		return fmt.Errorf("%w: a list of %d requests to node %d", verbs.ErrInvalidArg, len(l.WRs), l.Node)
	}
	// Task id 0 is no task's (ids start at 1): the completions only
	// return credits.
	sink := Task{w: w}
	sink.mark(l.WRs)
	if err := w.acquire(ctx, len(l.WRs)); err != nil {
		return err
	}
	if err := w.post(l.Node, l.WRs); err != nil {
		w.refund(len(l.WRs))
		return err
	}
	return nil
}

// refund gives back the credits of n requests that were never posted.
func (w *Worker) refund(n int) {
	w.mu.Lock()
	w.throttle.Release(n)
	w.grant()
	w.mu.Unlock()
}
