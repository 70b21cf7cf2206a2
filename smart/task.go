package smart

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// MaxBatch is the most work requests a Task posts in one list to a node.
const MaxBatch = 16

// Task is one coroutine-style task of a worker: it posts, parks until its
// completion arrives (the worker's poller wakes it), and resumes. A Task
// is used by the goroutine Worker.Go gave it.
type Task struct {
	w     *Worker
	ctx   context.Context
	id    uint32
	done  chan verbs.WC
	batch [MaxBatch]verbs.SendWR
	nb    int
	node  int
	sgl   [MaxBatch][1]verbs.SGE
	// pending is the wr_id of the last request of a list whose Do
	// returned before its completion (its context ended); 0 if none.
	pending uint64
	// A DoAll round (round.go): the signaled completions it still waits
	// for, the first failed status (+1; 0: none) and the poller's wake-up.
	owed   atomic.Int64
	failed atomic.Uint32
	wake   chan struct{}
}

// finish delivers a completion to the task (the poller's side): to the
// DoAll round it owes one to, else to Do.
func (t *Task) finish(wc verbs.WC) {
	if t.owed.Load() > 0 {
		t.settle(wc)
		return
	}
	select {
	case t.done <- wc:
	default:
	}
}

// Worker returns the task's worker.
func (t *Task) Worker() *Worker { return t.w }

// Do posts wrs (at most MaxBatch) to node as one list — only the last
// signaled, wr_ids encoding the task, worker and list size — waiting for
// credits first, and parks until the list completes. It returns the last
// request's completion, or an error for a failed one.
func (t *Task) Do(node int, wrs []verbs.SendWR) (verbs.WC, error) {
	return t.DoContext(t.ctx, node, wrs)
}

// DoContext is Do bounded by ctx instead of the task's context: for a
// long-lived task (Enter) that serves callers with contexts of their own.
// When ctx ends first, the list stays in flight: call Wait before reusing
// its buffers.
func (t *Task) DoContext(ctx context.Context, node int, wrs []verbs.SendWR) (verbs.WC, error) {
	if len(wrs) == 0 || len(wrs) > MaxBatch {
		return verbs.WC{}, fmt.Errorf("%w: a list of %d requests (1 … %d)", verbs.ErrInvalidArg, len(wrs), MaxBatch)
	}
	if node < 0 || node >= len(t.w.qps) {
		return verbs.WC{}, fmt.Errorf("%w: node %d", verbs.ErrInvalidArg, node)
	}
	for i := range wrs {
		wrs[i].ID = t.w.rt.wrID(t.id, t.w.id, 0)
		wrs[i].Flags &^= verbs.FlagSignaled
	}
	last := &wrs[len(wrs)-1]
	last.ID = t.w.rt.wrID(t.id, t.w.id, len(wrs))
	last.Flags |= verbs.FlagSignaled
	start := time.Now()
	if err := t.w.acquire(ctx, len(wrs)); err != nil {
		return verbs.WC{}, err
	}
	if err := t.w.post(node, wrs); err != nil {
		t.w.refund(len(wrs))
		return verbs.WC{}, err
	}
	for {
		select {
		case wc := <-t.done:
			if wc.Status != verbs.StatusSuccess {
				return wc, fmt.Errorf("smart: %v: %w", wc.Opcode, wc.Status.Err())
			}
			if wc.ID == last.ID {
				t.w.roundTrip(time.Since(start))
				return wc, nil
			}
		case <-ctx.Done():
			t.pending = last.ID
			return verbs.WC{}, ctx.Err()
		}
	}
}

// Wait waits, without a context, for the completion of the list a Do
// left in flight when its context ended (or for the runtime to close).
func (t *Task) Wait() { t.drain() }

// drain is Wait.
func (t *Task) drain() {
	t.waitRound(nil)
	for t.pending != 0 {
		select {
		case wc := <-t.done:
			if wc.ID == t.pending || wc.Status != verbs.StatusSuccess {
				t.pending = 0
			}
		case <-t.w.rt.ctx.Done():
			return
		}
	}
}

// one runs a single request.
func (t *Task) one(node int, w verbs.SendWR, local verbs.SGE) (verbs.WC, error) {
	t.sgl[0][0] = local
	w.SGL = t.sgl[0][:]
	t.batch[0] = w
	return t.Do(node, t.batch[:1])
}

// Read reads local.Length bytes at addr under rkey on node into local.
func (t *Task) Read(node int, local verbs.SGE, addr uint64, rkey uint32) error {
	_, err := t.one(node, verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: addr, RKey: rkey}, local)
	return err
}

// Write writes local to addr under rkey on node.
func (t *Task) Write(node int, local verbs.SGE, addr uint64, rkey uint32) error {
	_, err := t.one(node, verbs.SendWR{Opcode: verbs.OpWrite, RemoteAddr: addr, RKey: rkey}, local)
	return err
}

// CAS compares the 8 bytes at addr with compare and swaps in swap if they
// are equal; the original value lands in res (8 bytes).
func (t *Task) CAS(node int, res verbs.SGE, addr uint64, rkey uint32, compare, swap uint64) error {
	w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, RemoteAddr: addr, RKey: rkey}
	w.Atomic.Compare[0], w.Atomic.Swap[0] = compare, swap
	_, err := t.one(node, w, res)
	return err
}

// FAA adds add to the 8 bytes at addr; the original value lands in res.
func (t *Task) FAA(node int, res verbs.SGE, addr uint64, rkey uint32, add uint64) error {
	w := verbs.SendWR{Opcode: verbs.OpAtomicFetchAndAdd, RemoteAddr: addr, RKey: rkey}
	w.Atomic.Swap[0] = add
	_, err := t.one(node, w, res)
	return err
}

// MaskedCAS runs the enhanced compare-and-swap a (Size bytes) at addr;
// the original value lands in res.
func (t *Task) MaskedCAS(node int, res verbs.SGE, addr uint64, rkey uint32, a verbs.AtomicArgs) error {
	_, err := t.one(node, verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: addr, RKey: rkey, Atomic: a}, res)
	return err
}

// Add queues a request for the task's batch to node; Commit posts the
// batch (at most MaxBatch, one node per batch).
func (t *Task) Add(node int, w verbs.SendWR) error {
	if t.nb > 0 && node != t.node {
		return fmt.Errorf("%w: a batch goes to one node", verbs.ErrInvalidArg)
	}
	if t.nb == MaxBatch {
		return fmt.Errorf("%w: a batch holds %d requests", verbs.ErrInvalidArg, MaxBatch)
	}
	t.node = node
	if len(w.SGL) == 1 {
		t.sgl[t.nb][0] = w.SGL[0]
		w.SGL = t.sgl[t.nb][:]
	}
	t.batch[t.nb] = w
	t.nb++
	return nil
}

// Commit posts the batch and waits for it.
func (t *Task) Commit() (verbs.WC, error) {
	n := t.nb
	t.nb = 0
	return t.Do(t.node, t.batch[:n])
}

// Backoff waits before the k-th retry of a failed operation (k from 1),
// as the worker's conflict-avoidance controller says: a random wait up to
// min(C_max, C0·2^k). Short waits spin with yields, long ones sleep.
func (t *Task) Backoff(k int, r float64) {
	t.w.mu.Lock()
	d := t.w.backoff.Delay(k, r)
	t.w.mu.Unlock()
	if d <= 0 {
		return
	}
	if d >= 50*time.Microsecond {
		time.Sleep(d)
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.Gosched()
	}
}

// Abandoned records that an operation (a transaction, say) gave up after
// failures failed attempts, its last included: they count as retries
// for the backoff limit and the task limit.
func (t *Task) Abandoned(failures int) {
	t.w.mu.Lock()
	t.w.backoff.Abandoned(failures)
	t.w.mu.Unlock()
}

// Finished records that an operation (an update, say) finished after
// retries failed attempts: the retry rate drives the backoff limit and the
// task limit.
func (t *Task) Finished(retries int) {
	t.w.mu.Lock()
	t.w.backoff.Observe(retries)
	t.w.mu.Unlock()
}
