package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// TaskOps runs a store client's one-sided request lists as tasks of a
// smart runtime: slot i holds a task of worker i mod workers for the
// client's life, and each list goes out on that worker's QP to the node,
// under the worker's work-request throttling, its completion dispatched
// by the worker's poller. Safe for concurrent use.
type TaskOps struct {
	rt    *smart.Runtime
	mr    verbs.MR
	size  int
	free  chan int
	tasks []*smart.Task // slot i's task
	sc    []scratch
	trips atomic.Uint64

	// A slot whose caller gave up while its list was in flight is away:
	// a reclaim goroutine owns it until the list completes, then frees it
	// (or, once closed, ends its task).
	mu     sync.Mutex
	away   []bool
	closed bool
	gone   bool // the buffers are deregistered
}

var _ Poster = (*TaskOps)(nil)

// NewTaskOps registers slots buffers of size bytes in pd, the runtime's
// protection domain, and starts a task per slot on rt's workers (their
// task limit must leave room for them).
func NewTaskOps(ctx context.Context, pd verbs.PD, rt *smart.Runtime, slots, size int) (*TaskOps, error) {
	if rt == nil || len(rt.Workers()) == 0 {
		return nil, fmt.Errorf("%w: no smart runtime", verbs.ErrInvalidArg)
	}
	mr, err := pd.AllocMR(slots*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	o := &TaskOps{rt: rt, mr: mr, size: size, free: make(chan int, slots), tasks: make([]*smart.Task, slots), sc: make([]scratch, slots), away: make([]bool, slots)}
	ws := rt.Workers()
	for i := 0; i < slots; i++ {
		t, err := ws[i%len(ws)].Enter(ctx)
		if err != nil {
			o.Close()
			return nil, err
		}
		o.tasks[i] = t
		o.free <- i
	}
	return o, nil
}

// Acquire implements Poster.
func (o *TaskOps) Acquire(ctx context.Context) (Slot, error) {
	select { // a free slot without selectgo's locking of two channels
	case i := <-o.free:
		return slotOf(o.mr, o.size, i, &o.sc[i]), nil
	default:
	}
	select {
	case i := <-o.free:
		return slotOf(o.mr, o.size, i, &o.sc[i]), nil
	case <-ctx.Done():
		return Slot{}, ctx.Err()
	}
}

// Do implements Poster. A list that completes with an error status comes
// back as its completion (the caller reads the status); a context that
// ends first leaves the slot to be released when the list completes.
func (o *TaskOps) Do(ctx context.Context, s Slot, wrs []verbs.SendWR) (verbs.WC, error) {
	o.trips.Add(1)
	t := o.tasks[s.i]
	wc, err := t.DoContext(ctx, 0, wrs)
	switch {
	case err == nil:
		return wc, nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		o.mu.Lock()
		o.away[s.i] = true
		o.mu.Unlock()
		go o.reclaim(s.i)
		return verbs.WC{}, err
	case wc.Status != verbs.StatusSuccess:
		return wc, nil
	}
	return wc, fmt.Errorf("%w: %w", ErrConnection, err)
}

// Release implements Poster.
func (o *TaskOps) Release(s Slot) { o.free <- s.i }

// Trips implements Poster.
func (o *TaskOps) Trips() uint64 { return o.trips.Load() }

// reclaim waits for the list slot i's caller gave up on, then frees the
// slot, or ends its task when the TaskOps closed meanwhile (and releases
// the buffers when it was the last slot away).
func (o *TaskOps) reclaim(i int) {
	t := o.tasks[i]
	t.Wait()
	o.mu.Lock()
	o.away[i] = false
	closed := o.closed
	last := closed && !o.gone && !slices.Contains(o.away, true)
	if last {
		o.gone = true
	}
	o.mu.Unlock()
	if !closed {
		o.free <- i
		return
	}
	t.Leave()
	if last {
		o.mr.Deregister()
	}
}

// Close implements Poster: it ends the slots' tasks and releases their
// memory. A slot still away (its list in flight after its caller gave up)
// is ended by its reclaim goroutine once the list completes: Close does
// not wait for the node.
func (o *TaskOps) Close() error {
	o.mu.Lock()
	o.closed = true
	away := slices.Clone(o.away)
	last := !o.gone && !slices.Contains(away, true)
	if last {
		o.gone = true
	}
	o.mu.Unlock()
	for i, t := range o.tasks {
		if t != nil && !away[i] {
			t.Leave()
		}
	}
	if last {
		return o.mr.Deregister()
	}
	return nil
}
