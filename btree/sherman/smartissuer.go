package sherman

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// smartIssuer is Smart-BT's issuer: the client's operations run as
// tasks of a smart runtime. Slot i belongs to worker i mod Workers; an
// operation that takes it enters a task of that worker (the coroutine
// throttle: at most n_max run at once) and leaves it at release,
// reporting its failed lock attempts (the retry rate that drives the
// backoff limit and n_max). Its lists go out on the worker's QP to the
// memory node under the worker's credits, and the worker's poller wakes
// the task. The client's local lock table is untouched: tasks of every
// worker queue on it as goroutines do under Sherman's issuer.
type smartIssuer struct {
	cfg   SmartConfig
	rt    *smart.Runtime
	mr    verbs.MR
	slots []*slot
	st    []smartSlot // by slot index
	free  chan *slot
	n     atomic.Uint64
	read  atomic.Uint64
}

// smartSlot is the task of the operation holding a slot.
type smartSlot struct {
	task  *smart.Task
	fails int // failed lock attempts of the operation
}

var _ issuer = (*smartIssuer)(nil)

func newSmartIssuer(ctx context.Context, pd verbs.PD, cfg SmartConfig, size int, poll verbs.PollPolicy) (*smartIssuer, error) {
	rc, err := cfg.runtimeConfig(pd, poll)
	if err != nil {
		return nil, err
	}
	nslots := cfg.Workers * cfg.Tasks
	mr, err := pd.AllocMR(nslots*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("sherman: slot buffers: %w", err)
	}
	rt, err := smart.New(ctx, rc)
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("%w: sherman: %w", btree.ErrUnreachable, err)
	}
	q := &smartIssuer{cfg: cfg, rt: rt, mr: mr, st: make([]smartSlot, nslots), free: make(chan *slot, nslots)}
	for i := range nslots {
		s := &slot{idx: i, buf: mr.Bytes()[i*size : (i+1)*size : (i+1)*size], addr: mr.Addr() + uint64(i*size), lkey: mr.LKey()}
		q.slots = append(q.slots, s)
		q.free <- s
	}
	return q, nil
}

// acquire takes a free slot and enters a task of its worker.
func (q *smartIssuer) acquire(ctx context.Context) (*slot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var s *slot
	select {
	case s = <-q.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ws := q.rt.Workers()
	t, err := ws[s.idx%len(ws)].Enter(ctx)
	if err != nil {
		q.free <- s
		return nil, err
	}
	q.st[s.idx] = smartSlot{task: t}
	return s, nil
}

// do runs the list as one Do of the slot's task. A CONDITIONAL request
// whose guard failed completes skipped: the caller tells from the
// guard's word.
func (q *smartIssuer) do(ctx context.Context, s *slot, mn int, wrs []verbs.SendWR) error {
	q.n.Add(1)
	q.read.Add(readLen(wrs))
	t := q.st[s.idx].task
	wc, err := t.DoContext(ctx, mn, wrs)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The list may be in flight: the slot comes back once it is.
		go func() {
			t.Wait()
			q.release(s)
		}()
		return fmt.Errorf("%w: %w", errInFlight, ctx.Err())
	case wc.Status == verbs.StatusSkipped:
		return nil
	}
	return fmt.Errorf("%w: %w", btree.ErrUnreachable, err)
}

// conflict backs off after the try-th failed lock CAS: with Backoff,
// the worker's conflict-avoidance controller says how long; else
// Sherman's pause.
func (q *smartIssuer) conflict(ctx context.Context, s *slot, try int) error {
	st := &q.st[s.idx]
	st.fails++
	if !q.cfg.on(Backoff) {
		return pause(ctx, try)
	}
	st.task.Backoff(try+1, rand.Float64())
	return ctx.Err()
}

// release reports the operation's failed lock attempts, leaves its task
// and frees the slot.
func (q *smartIssuer) release(s *slot) {
	st := &q.st[s.idx]
	if t := st.task; t != nil {
		t.Finished(st.fails)
		t.Leave()
	}
	*st = smartSlot{}
	q.free <- s
}

func (q *smartIssuer) trips() uint64     { return q.n.Load() }
func (q *smartIssuer) readBytes() uint64 { return q.read.Load() }

// close stops the runtime (tasks still waiting fail) and frees the
// slots' memory.
func (q *smartIssuer) close() error {
	q.rt.Close()
	return q.mr.Deregister()
}

// workerStats is each worker's figures.
func (q *smartIssuer) workerStats() []smart.Stats {
	var out []smart.Stats
	for _, w := range q.rt.Workers() {
		out = append(out, w.Stats())
	}
	return out
}

// readLen is the bytes the READs of a list read.
func readLen(wrs []verbs.SendWR) uint64 {
	var n uint64
	for i := range wrs {
		if wrs[i].Opcode == verbs.OpRead {
			for _, g := range wrs[i].SGL {
				n += uint64(g.Length)
			}
		}
	}
	return n
}
