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
// smart runtime: slot i belongs to worker i mod workers, and each list
// goes out on that worker's QP to the node, under the worker's
// work-request throttling, its completion dispatched by the worker's
// poller. Safe for concurrent use.
type TaskOps struct {
	rt    *smart.Runtime
	mr    verbs.MR
	size  int
	free  chan int
	tasks []*smart.Task // the task holding each acquired slot
	trips atomic.Uint64
}

var _ Poster = (*TaskOps)(nil)

// NewTaskOps registers slots buffers of size bytes in pd, the runtime's
// protection domain, for lists run on rt's workers.
func NewTaskOps(pd verbs.PD, rt *smart.Runtime, slots, size int) (*TaskOps, error) {
	if rt == nil || len(rt.Workers()) == 0 {
		return nil, fmt.Errorf("%w: no smart runtime", verbs.ErrInvalidArg)
	}
	mr, err := pd.AllocMR(slots*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	o := &TaskOps{rt: rt, mr: mr, size: size, free: make(chan int, slots), tasks: make([]*smart.Task, slots)}
	for i := 0; i < slots; i++ {
		o.free <- i
	}
	return o, nil
}

// Acquire implements Poster: a free slot, and a task on its worker (the
// worker's task throttling may hold it back).
func (o *TaskOps) Acquire(ctx context.Context) (Slot, error) {
	var i int
	select {
	case i = <-o.free:
	case <-ctx.Done():
		return Slot{}, ctx.Err()
	}
	ws := o.rt.Workers()
	t, err := ws[i%len(ws)].Enter(ctx)
	if err != nil {
		o.free <- i
		return Slot{}, err
	}
	o.tasks[i] = t
	return slotOf(o.mr, o.size, i), nil
}

// Do implements Poster. A list that completes with an error status comes
// back as its completion (the caller reads the status); a context that
// ends first leaves the slot to be released when the list completes.
func (o *TaskOps) Do(ctx context.Context, s Slot, wrs []verbs.SendWR) (verbs.WC, error) {
	o.trips.Add(1)
	t := o.tasks[s.i]
	wc, err := t.Do(0, wrs)
	switch {
	case err == nil:
		return wc, nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		go o.Release(s) // Leave waits for the list in flight
		return verbs.WC{}, err
	case wc.Status != verbs.StatusSuccess:
		return wc, nil
	}
	return wc, fmt.Errorf("%w: %w", ErrConnection, err)
}

// Release implements Poster.
func (o *TaskOps) Release(s Slot) {
	t := o.tasks[s.i]
	o.tasks[s.i] = nil
	t.Leave()
	o.free <- s.i
}

// Trips implements Poster.
func (o *TaskOps) Trips() uint64 { return o.trips.Load() }

// Close implements Poster.
func (o *TaskOps) Close() error { return o.mr.Deregister() }
