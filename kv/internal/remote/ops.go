// Package remote runs a store client's one-sided requests on the QP of
// its rpc.Client: each request list gets a slot (a registered buffer and
// a wr_id tagged for the rpc client's completion router), and its
// completion, routed by the rpc client's poller, wakes the caller.
package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Ops is a pool of slots for one-sided request lists. Safe for concurrent
// use.
type Ops struct {
	qp       verbs.QP
	mr       verbs.MR
	size     int
	free     chan int
	slots    []chan verbs.WC
	scratch  []scratch
	done     <-chan struct{}
	cause    func() error
	progress func() int
	router   *verbs.Router
	tag      verbs.Tag // the slots' wr_ids carry it
	trips    atomic.Uint64

	// Lists are posted by combining (verbs.Combiner, yielding once):
	// concurrent callers' lists go out as one PostSend — one doorbell,
	// one frame on tcp. A failed post fails the lists it carried, and
	// every later post (failed, under pmu).
	comb   verbs.Combiner
	pmu    sync.Mutex
	failed error
}

// Conn is what Ops needs of the connection's completion side: an
// rpc.Client.
type Conn interface {
	// Router routes the completions of the connection's CQ; its poller
	// fails the connection when a handler returns an error.
	Router() *verbs.Router
	// Done closes when the connection is gone; Err then says why.
	Done() <-chan struct{}
	Err() error
	// Progress polls the completions once on the caller's goroutine.
	Progress() int
}

// New registers slots buffers of size bytes in pd for requests on qp,
// whose completions conn routes (registering on conn's router).
func New(pd verbs.PD, qp verbs.QP, slots, size int, conn Conn) (*Ops, error) {
	mr, err := pd.AllocMR(slots*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	o := &Ops{qp: qp, mr: mr, size: size, free: make(chan int, slots), slots: make([]chan verbs.WC, slots),
		scratch: make([]scratch, slots),
		done:    conn.Done(), cause: conn.Err, progress: conn.Progress, router: conn.Router()}
	o.comb = verbs.Combiner{Post: o.postAll, Fail: o.failBatch, Yield: true}
	for i := range o.slots {
		o.slots[i] = make(chan verbs.WC, 1)
		o.free <- i
	}
	if o.tag, err = o.router.Register(o.complete); err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("remote: %w", err)
	}
	return o, nil
}

// complete takes a completion of a slot's list (the router handler). A
// successful one, or a CONDITIONAL request that did not run
// (StatusSkipped: not an error), wakes the slot's caller; any other error
// fails the connection, and with it every list in flight, as the QP is in
// ERROR now.
func (o *Ops) complete(wc *verbs.WC) error {
	if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusSkipped {
		return fmt.Errorf("remote: connection: %v: %w", wc.Opcode, wc.Status.Err())
	}
	o.deliver(wc)
	return nil
}

// deliver hands a completion to its slot's caller.
func (o *Ops) deliver(wc *verbs.WC) {
	i := int(wc.ID & verbs.LowMask)
	if i < len(o.slots) {
		select {
		case o.slots[i] <- *wc:
		default:
		}
	}
}

// Slot is one request list's buffer and identity.
type Slot struct {
	i    int
	Buf  []byte // the slot's registered bytes
	addr uint64 // Buf's address
	lkey uint32
	sc   *scratch
}

// ListCap is how many requests a slot's List holds without allocating.
const ListCap = 8

// scratch is a slot's request list. It lives as long as the slot, so a
// list built in it stays valid until it completes (its SGLs too, which
// the QP reads then), even when its caller gives up first: the slot is
// not reused before that. A list of the pool's own memory is what keeps
// a GET from allocating: a list on the caller's stack escapes to the
// heap, as the poster keeps it.
type scratch struct {
	wrs [ListCap]verbs.SendWR
	sgl [ListCap]verbs.SGE
}

// slotOf is slot i of the slots of size bytes in mr, with its scratch
// list sc.
func slotOf(mr verbs.MR, size, i int, sc *scratch) Slot {
	return Slot{i: i, Buf: mr.Bytes()[i*size : (i+1)*size], addr: mr.Addr() + uint64(i*size), lkey: mr.LKey(), sc: sc}
}

// List returns the slot's request list of n requests and n SGEs, zeroed
// (for one SGE per request: wrs[j].SGL = sgl[j:j+1]). It is the slot's
// own (allocated when n > ListCap): valid until the slot's next List.
func (s Slot) List(n int) ([]verbs.SendWR, []verbs.SGE) {
	if n > ListCap || s.sc == nil {
		return make([]verbs.SendWR, n), make([]verbs.SGE, n)
	}
	wrs, sgl := s.sc.wrs[:n], s.sc.sgl[:n]
	clear(wrs)
	clear(sgl)
	return wrs, sgl
}

// SGE describes n bytes of the slot's buffer from off.
func (s Slot) SGE(off, n int) verbs.SGE {
	return verbs.SGE{Addr: s.addr + uint64(off), Length: uint32(n), LKey: s.lkey}
}

// Poster runs a store client's one-sided request lists in slots: Ops on
// the client's own connection, TaskOps as tasks of a smart runtime's
// workers.
type Poster interface {
	// Acquire takes a free slot, waiting while all are in use.
	Acquire(ctx context.Context) (Slot, error)
	// Do posts wrs in slot s (exactly one signaled, normally the last)
	// and waits for their completion. When ctx ends first it returns
	// ctx's error and releases the slot itself once the list completes:
	// the caller must not use the slot any more.
	Do(ctx context.Context, s Slot, wrs []verbs.SendWR) (verbs.WC, error)
	// Release returns a slot whose last list has completed.
	Release(s Slot)
	// Trips counts the lists run (each one round trip).
	Trips() uint64
	// Close releases the slots' memory; call it once nothing runs.
	Close() error
}

var _ Poster = (*Ops)(nil)

// Acquire takes a free slot, waiting while all are in use.
func (o *Ops) Acquire(ctx context.Context) (Slot, error) {
	select { // a free slot without selectgo's locking of three channels
	case i := <-o.free:
		return slotOf(o.mr, o.size, i, &o.scratch[i]), nil
	default:
	}
	select {
	case i := <-o.free:
		return slotOf(o.mr, o.size, i, &o.scratch[i]), nil
	case <-ctx.Done():
		return Slot{}, ctx.Err()
	case <-o.done:
		return Slot{}, o.gone()
	}
}

// Release returns a slot whose last request list has completed.
func (o *Ops) Release(s Slot) { o.free <- s.i }

// ErrConnection marks a failed connection.
var ErrConnection = fmt.Errorf("remote: connection failed")

func (o *Ops) gone() error {
	if err := o.cause(); err != nil {
		return fmt.Errorf("%w: %w", ErrConnection, err)
	}
	return ErrConnection
}

// Do posts wrs (their IDs are set to the slot's; exactly one must be
// signaled, normally the last) and waits for that completion. When ctx
// ends first, the slot is released only once the completion arrives, and
// Do returns ctx's error: the caller must not use the slot any more.
func (o *Ops) Do(ctx context.Context, s Slot, wrs []verbs.SendWR) (verbs.WC, error) {
	id := o.tag.ID(uint64(s.i))
	for i := range wrs {
		wrs[i].ID = id
	}
	o.trips.Add(1)
	if err := o.post(wrs); err != nil {
		return verbs.WC{}, fmt.Errorf("%w: %w", ErrConnection, err)
	}
	ch := o.slots[s.i]
	select {
	case wc := <-ch:
		return wc, nil
	case <-o.done:
		return verbs.WC{}, o.gone()
	case <-ctx.Done():
		go func() {
			select {
			case <-ch:
				o.free <- s.i
			case <-o.done:
			}
		}()
		return verbs.WC{}, ctx.Err()
	}
}

// Trips counts the request lists run (each one round trip).
func (o *Ops) Trips() uint64 { return o.trips.Load() }

// postAll posts wrs, waiting out a full send queue: the requests
// already accepted stay posted, the rest go again once polled
// completions have freed room.
func (o *Ops) postAll(wrs []verbs.SendWR) error {
	return verbs.PostAll(o.qp, wrs, o.progress, o.done)
}

// post submits wrs to the combiner, unless an earlier post failed.
func (o *Ops) post(wrs []verbs.SendWR) error {
	o.pmu.Lock()
	err := o.failed
	o.pmu.Unlock()
	if err != nil {
		return err
	}
	o.comb.Submit(wrs...)
	return nil
}

// failBatch fails the lists of a batch whose post failed (the
// Combiner's Fail), and every later post.
func (o *Ops) failBatch(batch []verbs.SendWR, err error) {
	o.pmu.Lock()
	if o.failed == nil {
		o.failed = err
	}
	o.pmu.Unlock()
	for i := range batch {
		o.deliver(&verbs.WC{ID: batch[i].ID, Status: verbs.StatusWRFlushErr})
	}
}

// Close leaves the router and deregisters the buffers; call it once the
// connection is closed.
func (o *Ops) Close() error {
	o.router.Unregister(o.tag)
	return o.mr.Deregister()
}

// MapErr turns the errors of a store client's RPCs and one-sided
// requests into kv's: a handler's kv.ErrFull or kv.ErrTooLarge comes back
// as itself, a closed client's failure as kv.ErrClosed, a context's end as
// its error, and any other failure as kv.ErrUnreachable.
func MapErr(err error, closed bool) error {
	if err == nil {
		return nil // before re escapes to the heap: no allocation
	}
	return mapErr(err, closed)
}

// mapErr is MapErr for a non-nil error.
func mapErr(err error, closed bool) error {
	var re *rpc.RemoteError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &re):
		for _, known := range []error{kv.ErrFull, kv.ErrTooLarge} {
			// The handler's message already starts with known's text:
			// say it once.
			if rest, ok := strings.CutPrefix(re.Msg, known.Error()); ok {
				if rest = strings.TrimPrefix(rest, ": "); rest == "" {
					return known
				}
				return fmt.Errorf("%w: %s", known, rest)
			}
		}
		return fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	case errors.Is(err, kv.ErrUnreachable), errors.Is(err, kv.ErrNotFound), errors.Is(err, kv.ErrFull), errors.Is(err, kv.ErrTooLarge):
		return err
	case closed:
		return kv.ErrClosed
	}
	return fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
}
