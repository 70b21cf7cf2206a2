package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// SlotConn is one slot's own connection to the node (SoloOps): a QP whose
// completions, and only its, go to CQ. Close releases both.
type SlotConn struct {
	QP    verbs.QP
	CQ    verbs.CQ
	Close func()
}

// SoloOps runs each slot's request lists on the slot's own QP and CQ,
// polled by the slot's caller: nobody else posts on the QP or polls the
// CQ while the slot is taken (both may be SingleThreaded). Over a device
// that maps the node's memory (shm), a one-sided list completes inside
// PostSend, and the caller finds its completion right after it: a GET
// runs on its task's goroutine from start to end, with no poller to wake
// it and no lock shared with the other tasks. A list that has to wait
// (over a link, or a PRISM chain the node runs) is waited for by its
// caller as the policy says. Safe for concurrent use.
type SoloOps struct {
	mr    verbs.MR
	size  int
	free  chan int
	conns []SlotConn
	sc    []scratch
	wcs   []verbs.WC // slot i's completion buffer: wcs[i]
	poll  verbs.PollPolicy
	trips atomic.Uint64

	done   <-chan struct{} // the client's connection is gone
	cause  func() error
	ctx    context.Context // ends with Close: the reclaimers stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the watcher and the reclaimers

	mu     sync.Mutex
	failed error // the first failed list or connection
}

var _ Poster = (*SoloOps)(nil)

// NewSolo registers one buffer of size bytes per connection in pd and
// runs a slot on each (conns are the SoloOps' from then on: Close closes
// them). When conn's connection is gone (Done), every slot's QP moves to
// ERROR, so that the lists in flight complete (flushed) and no caller
// waits for a node that will not answer.
func NewSolo(pd verbs.PD, conns []SlotConn, size int, poll verbs.PollPolicy, conn Conn) (*SoloOps, error) {
	if len(conns) == 0 {
		return nil, fmt.Errorf("%w: no slot connections", verbs.ErrInvalidArg)
	}
	mr, err := pd.AllocMR(len(conns)*size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	o := &SoloOps{mr: mr, size: size, free: make(chan int, len(conns)), conns: conns, sc: make([]scratch, len(conns)),
		wcs: make([]verbs.WC, len(conns)), poll: poll, done: conn.Done(), cause: conn.Err}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	for i := range conns {
		o.free <- i
	}
	o.wg.Add(1)
	go o.watch()
	return o, nil
}

// watch flushes every slot's QP once the client's connection is gone or
// a slot's list failed (either closes done or sets failed and cancels
// nothing: fail calls flush itself).
func (o *SoloOps) watch() {
	defer o.wg.Done()
	select {
	case <-o.done:
		o.fail(o.gone())
	case <-o.ctx.Done():
	}
}

// fail records the first failure and moves every slot's QP to ERROR: the
// lists in flight complete, flushed, and every later call fails.
func (o *SoloOps) fail(err error) {
	o.mu.Lock()
	first := o.failed == nil
	if first {
		o.failed = err
	}
	o.mu.Unlock()
	if first {
		for _, c := range o.conns {
			_ = c.QP.Modify(verbs.QPAttr{State: verbs.StateError})
		}
	}
}

// err is the recorded failure, if any.
func (o *SoloOps) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

func (o *SoloOps) gone() error {
	if err := o.cause(); err != nil {
		return fmt.Errorf("%w: %w", ErrConnection, err)
	}
	return ErrConnection
}

// Acquire implements Poster.
func (o *SoloOps) Acquire(ctx context.Context) (Slot, error) {
	if err := o.err(); err != nil {
		return Slot{}, err
	}
	select {
	case i := <-o.free:
		return slotOf(o.mr, o.size, i, &o.sc[i]), nil
	default:
	}
	select {
	case i := <-o.free:
		return slotOf(o.mr, o.size, i, &o.sc[i]), nil
	case <-ctx.Done():
		return Slot{}, ctx.Err()
	case <-o.done:
		return Slot{}, o.gone()
	}
}

// Release implements Poster.
func (o *SoloOps) Release(s Slot) { o.free <- s.i }

// Trips implements Poster.
func (o *SoloOps) Trips() uint64 { return o.trips.Load() }

// Do implements Poster: it posts wrs on the slot's QP and polls the
// slot's CQ for their completion. A list that completes with an error
// status fails every slot (the QP is in ERROR: as with Ops, the
// connection is gone) and comes back as ErrConnection; a context that
// ends first leaves the slot to be released when the list completes.
func (o *SoloOps) Do(ctx context.Context, s Slot, wrs []verbs.SendWR) (verbs.WC, error) {
	if err := o.err(); err != nil {
		return verbs.WC{}, err
	}
	for i := range wrs {
		wrs[i].ID = uint64(s.i)
	}
	o.trips.Add(1)
	c := o.conns[s.i]
	if err := c.QP.PostSend(wrs); err != nil {
		err = fmt.Errorf("%w: %w", ErrConnection, err)
		o.fail(err)
		return verbs.WC{}, err
	}
	wc := o.wcs[s.i : s.i+1]
	n, err := c.CQ.Poll(wc) // over shm a one-sided list has completed already
	if n == 0 && err == nil {
		n, err = verbs.PollWait(ctx, c.CQ, wc, o.poll)
	}
	switch {
	case n > 0:
		return o.check(wc[0])
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		o.wg.Add(1)
		go o.reclaim(s.i)
		return verbs.WC{}, err
	}
	err = fmt.Errorf("%w: %w", ErrConnection, err)
	o.fail(err)
	return verbs.WC{}, err
}

// check passes a list's completion on: a success, or a CONDITIONAL
// request that did not run (StatusSkipped: not an error); any other status
// fails every slot.
func (o *SoloOps) check(wc verbs.WC) (verbs.WC, error) {
	if wc.Status == verbs.StatusSuccess || wc.Status == verbs.StatusSkipped {
		return wc, nil
	}
	err := fmt.Errorf("%w: %v: %w", ErrConnection, wc.Opcode, wc.Status.Err())
	if o.err() == nil {
		o.fail(err)
	}
	return verbs.WC{}, err
}

// reclaim waits for the list slot i's caller gave up on, then frees the
// slot (unless the list failed, or the SoloOps closed meanwhile).
func (o *SoloOps) reclaim(i int) {
	defer o.wg.Done()
	c := o.conns[i]
	wc := o.wcs[i : i+1]
	n, err := verbs.PollWait(o.ctx, c.CQ, wc, o.poll)
	if n == 0 || err != nil {
		return
	}
	if _, err := o.check(wc[0]); err == nil {
		o.free <- i
	}
}

// Close implements Poster: it stops the slots' reclaimers, closes the
// slots' connections and releases their buffers. Call it once no caller
// is inside Acquire or Do.
func (o *SoloOps) Close() error {
	o.cancel()
	o.wg.Wait()
	CloseSlotConns(o.conns)
	return o.mr.Deregister()
}

// CloseSlotConns closes conns (those with a Close).
func CloseSlotConns(conns []SlotConn) {
	for _, c := range conns {
		if c.Close != nil {
			c.Close()
		}
	}
}
