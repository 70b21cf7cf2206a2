package prismrs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// errDown is the result of a list whose replica connection failed.
var errDown = errors.New("prismrs: replica connection failed")

// A slot's buffer: where its lists' local operands and results live.
const (
	offCAS     = 0  // a slot read, or the CAS's previous ⟨pointer, tag⟩: 16 bytes
	offAlloc   = 16 // the allocated buffer's address, read back from the scratch area
	offTag     = 24 // the new tag, the source of the inline WRITE to the scratch area
	offTail    = 32 // the return ring's tail (FETCH_AND_ADD result)
	offData    = 64 // a ⟨tag | data⟩ buffer: read, or written by ALLOCATE
	returnMax  = 64 // buffers returned per list
	scratchPtr = 0  // the scratch area: ⟨allocated address, new tag⟩, the CAS's swap operand
	scratchTag = 8
)

// slotSize is the buffer of a slot for bs-byte blocks: the fixed part,
// then a ⟨tag | data⟩ buffer, 64-byte aligned (the ring fills' results
// share the data area).
func slotSize(bs int) int { return offData + max((replica.BufHead+bs+63)&^63, 8*returnMax) }

// result is what became of a list posted in a slot.
type result struct {
	r   *rconn
	s   *slot
	wc  verbs.WC
	err error // errDown when the connection failed
}

// slot is one list in flight at a replica: its buffer and request list
// (they must stay valid until it completes), and where its result goes.
type slot struct {
	i        int
	buf      []byte
	addr     uint64
	lkey     uint32
	wrs      [5]verbs.SendWR
	sgl      [5]verbs.SGE
	inflight atomic.Bool
	res      chan<- result
}

// sge describes n bytes of the slot's buffer from off.
func (s *slot) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: s.addr + uint64(off), Length: uint32(n), LKey: s.lkey}
}

// rconn is the client's connection to one replica: an rpc client for
// the setup calls, and slots for one-sided lists, whose completions the
// rpc client's poller routes here.
type rconn struct {
	c    *Client
	idx  int
	addr string
	info replica.Info
	conn *cm.Conn
	cq   verbs.CQ
	rpc  *rpc.Client
	mr   verbs.MR
	tag  verbs.Tag
	comb verbs.Combiner

	slots []*slot
	free  chan *slot
	dead  atomic.Bool
	held  atomic.Int32   // slots taken and not yet released
	wg    sync.WaitGroup // watch
	once  sync.Once      // close

	rmu     sync.Mutex
	returns []prism.Returned
	kick    chan struct{}
	retStop chan struct{} // closes: the returner flushes and stops
	retDone chan struct{}
	stop    chan struct{} // closes: the watcher fails what is in flight
}

// dial connects to replica addr (cm address) and starts its rpc client.
func (c *Client) dial(ctx context.Context, idx int, addr string) (*rconn, error) {
	cq, err := c.dev.CreateCQ(4096)
	if err != nil {
		return nil, err
	}
	conn, err := cm.Dial(ctx, c.dev, addr, replica.DialOptions(c.pd, cq, c.cfg.Token, c.cfg.Timeout))
	if err != nil {
		cq.Destroy()
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	rc, err := rpc.NewClient(c.pd, conn.QP(), cq, rpc.ClientConfig{MaxMessage: replica.MaxInfo + rpc.Header, Slots: 4, Poll: c.cfg.Poll})
	if err != nil {
		conn.Close()
		cq.Destroy()
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	return &rconn{c: c, idx: idx, addr: addr, conn: conn, cq: cq, rpc: rc, kick: make(chan struct{}, 1),
		retStop: make(chan struct{}), retDone: make(chan struct{}), stop: make(chan struct{})}, nil
}

// call calls a replica method, its handler's errors typed again.
func (r *rconn) call(ctx context.Context, method uint16, req []byte) ([]byte, error) {
	resp := make([]byte, replica.MaxInfo)
	n, err := r.rpc.Call(ctx, method, req, resp)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", r.addr, replica.MapErr(err))
	}
	return resp[:n], nil
}

// start registers the slots' buffers (for the volume's block size) and
// their completion route, and starts the watcher and the returner.
func (r *rconn) start(info replica.Info, slots int) error {
	size := slotSize(info.Layout.BlockSize)
	mr, err := r.c.pd.AllocMR(slots*size, verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	tag, err := r.rpc.Router().Register(r.complete)
	if err != nil {
		mr.Deregister()
		return err
	}
	r.info, r.mr, r.tag = info, mr, tag
	r.free = make(chan *slot, slots)
	for i := range slots {
		s := &slot{i: i, buf: mr.Bytes()[i*size : (i+1)*size], addr: mr.Addr() + uint64(i*size), lkey: mr.LKey()}
		r.slots = append(r.slots, s)
		r.free <- s
	}
	r.comb = verbs.Combiner{Post: func(b []verbs.SendWR) error { return verbs.PostAll(r.conn.QP(), b, r.rpc.Progress, r.rpc.Done()) },
		Fail: r.failBatch, Yield: true}
	r.wg.Add(1)
	go r.watch()
	go r.returner()
	return nil
}

// complete takes a completion of a slot's list (the router's handler).
// An error status fails the connection: the QP is in ERROR, and watch
// fails the lists still in flight.
func (r *rconn) complete(wc *verbs.WC) error {
	i := int(wc.ID & verbs.LowMask)
	if i >= len(r.slots) {
		return nil
	}
	if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusSkipped {
		err := fmt.Errorf("prismrs: replica %s: %v: %w", r.addr, wc.Opcode, wc.Status.Err())
		r.deliver(r.slots[i], *wc, fmt.Errorf("%w: %w", errDown, err))
		return err
	}
	r.deliver(r.slots[i], *wc, nil)
	return nil
}

// deliver hands a slot's result to its owner, once per list.
func (r *rconn) deliver(s *slot, wc verbs.WC, err error) {
	if s.inflight.CompareAndSwap(true, false) {
		s.res <- result{r: r, s: s, wc: wc, err: err}
	}
}

// watch fails every list in flight once the connection is gone or the
// client closes.
func (r *rconn) watch() {
	defer r.wg.Done()
	select {
	case <-r.rpc.Done():
	case <-r.stop:
	}
	r.dead.Store(true)
	down := errDown
	if err := r.rpc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		down = fmt.Errorf("%w: %w", errDown, err)
	}
	for _, s := range r.slots {
		r.deliver(s, verbs.WC{}, down)
	}
	r.c.signal()
	select {
	case <-r.stop: // closed
	default:
		slog.Warn("prismrs: replica connection failed; reconnecting", "replica", r.addr, "err", r.rpc.Err())
		r.c.reconnect(r.idx, r)
	}
}

// failBatch fails the lists of a batch whose post failed.
func (r *rconn) failBatch(batch []verbs.SendWR, _ error) {
	for i := range batch {
		if j := int(batch[i].ID & verbs.LowMask); j < len(r.slots) {
			r.deliver(r.slots[j], verbs.WC{}, errDown)
		}
	}
}

// tryAcquire takes a free slot, if any, of a live connection.
func (r *rconn) tryAcquire() *slot {
	if r.dead.Load() {
		return nil
	}
	select {
	case s := <-r.free:
		r.held.Add(1)
		return s
	default:
		return nil
	}
}

// release returns a slot whose list has completed.
func (r *rconn) release(s *slot) {
	r.free <- s
	r.held.Add(-1)
	r.c.signal()
}

// post posts wrs in slot s (the last one signaled); the result goes to
// res.
func (r *rconn) post(s *slot, wrs []verbs.SendWR, res chan<- result) {
	id := r.tag.ID(uint64(s.i))
	for i := range wrs {
		wrs[i].ID = id
	}
	wrs[len(wrs)-1].Flags |= verbs.FlagSignaled
	s.res = res
	s.inflight.Store(true)
	if r.dead.Load() {
		r.deliver(s, verbs.WC{}, errDown)
		return
	}
	r.comb.Submit(wrs...)
}

// do runs one list in s and waits for it. When the list fails, or ctx
// ends first, the slot is released (once the list completes).
func (r *rconn) do(ctx context.Context, s *slot, wrs []verbs.SendWR) (result, error) {
	ch := make(chan result, 1)
	r.post(s, wrs, ch)
	select {
	case res := <-ch:
		if res.err != nil {
			r.release(s)
		}
		return res, res.err
	case <-ctx.Done():
		go func() { r.release((<-ch).s) }()
		return result{}, fmt.Errorf("%w: %w", blockstore.ErrNoQuorum, ctx.Err())
	}
}

// close stops the returner and the watcher and closes the connection.
func (r *rconn) close() { r.once.Do(r.closeOnce) }

func (r *rconn) closeOnce() {
	if r.mr != nil { // started
		close(r.retStop)
		<-r.retDone
	}
	close(r.stop)
	r.rpc.Close()
	r.wg.Wait() // every list in flight has failed
	r.conn.Close()
	r.cq.Destroy()
	if r.mr != nil {
		r.rpc.Router().Unregister(r.tag)
		// The slots' owners fill no list after they saw their slot's
		// result; wait for them to give the slots back before the
		// memory goes. An owner that never does keeps the memory.
		for deadline := time.Now().Add(10 * time.Second); r.held.Load() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				slog.Warn("prismrs: replica connection closed with slots still held; its buffers stay", "replica", r.addr, "held", r.held.Load())
				return
			}
		}
		r.mr.Deregister()
	}
}
