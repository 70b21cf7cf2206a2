package prismtx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// A chain's buffer (one per slot of a connection): its results and the
// item it writes or reads.
const (
	offOld     = 0  // a CAS's previous value (32 bytes), or a slot read
	offPendOld = 32 // the pending version CAS's previous ⟨pendPtr, pendTS⟩
	offAlloc   = 64 // the ALLOCATEd buffer's address, read back from the scratch area
	offTS      = 72 // the timestamp an inline WRITE puts in the scratch area
	offTail    = 80 // the return ring's tail (FETCH_AND_ADD result)
	offItem    = 128
	chainBuf   = offItem + (maxItem+tail+63)&^63
	listCap    = 8
)

// The scratch area of a write validation chain: ⟨ALLOCATEd address,
// TS⟩, the operand of the CAS that sets the slot's ⟨pendPtr, pendTS⟩.
const (
	scratchPtr = 0
	scratchTS  = 8
)

// conn is a client's connection to one node: an rpc client for setup,
// and slots in which chains run — each a registered buffer and a wr_id
// the rpc client's poller routes back here.
type conn struct {
	idx  int
	addr string
	lay  layout
	cq   verbs.CQ
	cm   *cm.Conn
	rpc  *rpc.Client
	mr   verbs.MR
	tag  verbs.Tag
	comb verbs.Combiner
	free chan int
	done []chan verbs.WC
	wrs  [][listCap]verbs.SendWR
	sgl  [][listCap]verbs.SGE

	pmu    sync.Mutex
	failed error

	routed  bool // tag registered with the rpc client's router
	returns returner
	lists   atomic.Uint64
}

// chain is a slot taken for one list: its buffer and request list.
type chain struct {
	c    *conn
	i    int
	buf  []byte
	addr uint64
	wrs  []verbs.SendWR
	sgl  []verbs.SGE
}

// sge describes n bytes of the chain's buffer from off.
func (ch *chain) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: ch.addr + uint64(off), Length: uint32(n), LKey: ch.c.mr.LKey()}
}

// dial connects to the node at addr (its cm address) and learns its
// layout.
func dial(ctx context.Context, dev verbs.Device, pd verbs.PD, idx int, addr, token string, slots int, poll verbs.PollPolicy) (_ *conn, err error) {
	cq, err := dev.CreateCQ(4096)
	if err != nil {
		return nil, err
	}
	c := &conn{idx: idx, addr: addr, cq: cq}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.cm, err = cm.Dial(ctx, dev, addr, DialOptions(pd, cq, token)); err != nil {
		return nil, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, addr, err)
	}
	if c.rpc, err = rpc.NewClient(pd, c.cm.QP(), cq, rpc.ClientConfig{MaxMessage: rpcMessage, Slots: 4, Poll: poll}); err != nil {
		return nil, err
	}
	resp, err := c.call(ctx, MethodInfo, nil)
	if err != nil {
		return nil, err
	}
	if c.lay, err = unmarshalLayout(resp); err != nil {
		return nil, fmt.Errorf("node %s: %w", addr, err)
	}
	if c.mr, err = pd.AllocMR((slots+1)*chainBuf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	tag, err := c.rpc.Router().Register(c.complete)
	if err != nil {
		return nil, err
	}
	c.tag, c.routed = tag, true
	// Slot number slots is the returner's.
	c.free, c.done = make(chan int, slots), make([]chan verbs.WC, slots+1)
	c.wrs, c.sgl = make([][listCap]verbs.SendWR, slots), make([][listCap]verbs.SGE, slots)
	for i := range slots + 1 {
		c.done[i] = make(chan verbs.WC, 1)
		if i < slots {
			c.free <- i
		}
	}
	c.comb = verbs.Combiner{Post: func(b []verbs.SendWR) error { return verbs.PostAll(c.cm.QP(), b, c.rpc.Progress, c.rpc.Done()) },
		Fail: c.failBatch, Yield: true}
	c.returns.start(c, slots)
	return c, nil
}

// call calls a node method.
func (c *conn) call(ctx context.Context, method uint16, req []byte) ([]byte, error) {
	resp := make([]byte, rpcMessage)
	n, err := c.rpc.Call(ctx, method, req, resp)
	if err != nil {
		var re *rpc.RemoteError
		if errors.As(err, &re) && len(re.Msg) >= len(ErrIDTaken.Error()) && re.Msg[:len(ErrIDTaken.Error())] == ErrIDTaken.Error() {
			return nil, fmt.Errorf("node %s: %w", c.addr, ErrIDTaken)
		}
		return nil, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, c.addr, err)
	}
	return resp[:n], nil
}

// complete takes a completion of a chain (the router's handler). An
// error status fails the connection (the QP is in ERROR): its poller
// stops and every chain in flight fails through Done.
func (c *conn) complete(wc *verbs.WC) error {
	i := int(wc.ID & verbs.LowMask)
	if i < len(c.done) {
		select {
		case c.done[i] <- *wc:
		default:
		}
	}
	if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusSkipped {
		return fmt.Errorf("prismtx: node %s: %v: %w", c.addr, wc.Opcode, wc.Status.Err())
	}
	return nil
}

// failBatch fails the chains of a batch whose post failed, and every
// later post.
func (c *conn) failBatch(batch []verbs.SendWR, err error) {
	c.pmu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	c.pmu.Unlock()
	for i := range batch {
		if j := int(batch[i].ID & verbs.LowMask); j < len(c.done) {
			select {
			case c.done[j] <- verbs.WC{ID: batch[i].ID, Status: verbs.StatusWRFlushErr}:
			default:
			}
		}
	}
}

// gone is the error of a failed connection.
func (c *conn) gone() error {
	if err := c.rpc.Err(); err != nil {
		return fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, c.addr, err)
	}
	return fmt.Errorf("%w: node %s: connection closed", txn.ErrUnreachable, c.addr)
}

// acquire takes a free slot for a chain of n requests.
func (c *conn) acquire(ctx context.Context, n int) (*chain, error) {
	var i int
	select {
	case i = <-c.free:
	default:
		select {
		case i = <-c.free:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.rpc.Done():
			return nil, c.gone()
		}
	}
	ch := &chain{c: c, i: i, buf: c.mr.Bytes()[i*chainBuf : (i+1)*chainBuf], addr: c.mr.Addr() + uint64(i*chainBuf),
		wrs: c.wrs[i][:n], sgl: c.sgl[i][:n]}
	clear(ch.wrs)
	clear(ch.sgl)
	return ch, nil
}

// post posts the chain's list (the last request signaled); wait waits for
// it.
func (ch *chain) post() error {
	c := ch.c
	id := c.tag.ID(uint64(ch.i))
	for i := range ch.wrs {
		ch.wrs[i].ID = id
	}
	ch.wrs[len(ch.wrs)-1].Flags |= verbs.FlagSignaled
	c.pmu.Lock()
	err := c.failed
	c.pmu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, c.addr, err)
	}
	c.lists.Add(1)
	c.comb.Submit(ch.wrs...)
	return nil
}

// wait waits for the chain's completion and releases its slot, unless
// ctx ends first: the slot is then released once the chain completes,
// and wait returns ctx's error. Its buffer is the caller's until it
// calls done.
func (ch *chain) wait(ctx context.Context) (verbs.WC, error) {
	c := ch.c
	select {
	case wc := <-c.done[ch.i]:
		if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusSkipped {
			return wc, fmt.Errorf("%w: node %s: %v: %w", txn.ErrUnreachable, c.addr, wc.Opcode, wc.Status.Err())
		}
		return wc, nil
	case <-c.rpc.Done():
		return verbs.WC{}, c.gone()
	case <-ctx.Done():
		i := ch.i
		go func() {
			select {
			case <-c.done[i]:
				if i < len(c.wrs) { // not the returner's
					c.free <- i
				}
			case <-c.rpc.Done():
			}
		}()
		ch.i = -1
		return verbs.WC{}, ctx.Err()
	}
}

// release gives the chain's slot back (after wait returned without
// ctx's error).
func (ch *chain) release() {
	if ch.i >= 0 {
		ch.c.free <- ch.i
		ch.i = -1
	}
}

// run posts the chain and waits for it.
func (ch *chain) run(ctx context.Context) (verbs.WC, error) {
	if err := ch.post(); err != nil {
		ch.release()
		return verbs.WC{}, err
	}
	return ch.wait(ctx)
}

// giveBack queues a version buffer no slot points to any more for return
// to the node.
func (c *conn) giveBack(addr uint64) {
	if addr == 0 || addr == c.lay.Absent {
		return
	}
	c.returns.add(addr)
}

// close stops the returner and closes the connection.
func (c *conn) close() {
	c.returns.stop()
	if c.rpc != nil {
		c.rpc.Close()
	}
	if c.cm != nil {
		c.cm.Close()
	}
	if c.routed {
		c.rpc.Router().Unregister(c.tag)
	}
	if c.mr != nil {
		c.mr.Deregister()
	}
	c.cq.Destroy()
}
