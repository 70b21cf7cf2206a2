package remote

import (
	"context"
	"errors"
	"fmt"
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
	trips atomic.Uint64
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
	o := &TaskOps{rt: rt, mr: mr, size: size, free: make(chan int, slots), tasks: make([]*smart.Task, slots)}
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
	select {
	case i := <-o.free:
		return slotOf(o.mr, o.size, i), nil
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
		go func() {
			t.Wait()
			o.free <- s.i
		}()
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

// Close implements Poster: it ends the slots' tasks and releases their
// memory.
func (o *TaskOps) Close() error {
	for i, t := range o.tasks {
		if t != nil {
			t.Leave()
			o.tasks[i] = nil
		}
	}
	return o.mr.Deregister()
}
