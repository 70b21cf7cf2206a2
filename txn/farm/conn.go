package farm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// ClientTimeout is the retry timeout of connections: a node that answers
// nothing for about 8 times as long loses its clients' connections.
const ClientTimeout = 250 * time.Millisecond

// dialOptions are the cm options of a connection to a node.
func dialOptions(pd verbs.PD, cq verbs.CQ, token string) cm.Options {
	return cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap, Access: verbs.AccessAll, Timeout: ClientTimeout,
		PrivateData: memnode.Hello{Service: Name, Token: token}.Marshal()}
}

// A list's wr_id: the slot in the low slotBits bits, the slot's
// generation above.
const (
	slotBits = 16
	slotMask = 1<<slotBits - 1
)

// errDown is the error of a list whose connection failed.
var errDown = errors.New("farm: connection failed")

// slot is one request list in flight on a connection: its buffer and
// requests (valid until it completes) and where its completion goes.
type slot struct {
	i    int
	gen  atomic.Uint64 // the list in flight: its wr_id carries it, so a late completion of an earlier list is told apart
	buf  []byte
	addr uint64
	lkey uint32
	wrs  [3]verbs.SendWR
	sgl  [3]verbs.SGE
	done chan verbs.WC
}

// sge describes n bytes of the slot's buffer from off.
func (s *slot) sge(off, n int) verbs.SGE {
	return verbs.SGE{Addr: s.addr + uint64(off), Length: uint32(n), LKey: s.lkey}
}

// conn is a client's connection to one node: an rpc client (HERD
// requests) for MethodOpen and LOCK, one-sided READs of the node's
// tables, and WRITEs into the client's log ring there.
type conn struct {
	db  *DB
	idx int
	sid uint32 // the connection's session id at the node
	// checked is db.failed when the connection was last known good: a
	// commit probes it first when another failed since (recovery fences a
	// coordinator's connections to several nodes at once).
	checked atomic.Uint64
	cm      *cm.Conn
	cq      verbs.CQ
	rpc     *rpc.Client
	mr      verbs.MR
	tag     verbs.Tag
	size    int // a slot's bytes

	tables   uint64
	tableKey uint32
	logsKey  uint32
	ringAddr uint64

	slots   []*slot
	free    chan *slot
	held    atomic.Int32
	closing atomic.Bool // no slot is handed out any more
	once    sync.Once

	rmu   sync.Mutex // the ring: reservations and posts in ring order
	ring  ringWriter
	trunc []uint64 // committed transactions this node backs up, to truncate
}

// dialConn connects to node i, creates the layout there first when
// create is not nil, and opens the client's log ring; it returns the
// node's layout.
func (db *DB) dialConn(ctx context.Context, i int, create *Layout) (*conn, Layout, error) {
	addr := db.cfg.Nodes[i]
	cq, err := db.dev.CreateCQ(4096)
	if err != nil {
		return nil, Layout{}, err
	}
	cc, err := cm.Dial(ctx, db.dev, addr, dialOptions(db.pd, cq, db.cfg.Token))
	if err != nil {
		cq.Destroy()
		return nil, Layout{}, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, addr, err)
	}
	rc, err := rpc.NewClient(db.pd, cc.QP(), cq, rpc.ClientConfig{MaxMessage: db.cfg.MaxMessage, Slots: rpcSlots, Poll: db.cfg.Poll, Herd: true})
	if err != nil {
		cc.Close()
		cq.Destroy()
		return nil, Layout{}, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, addr, err)
	}
	c := &conn{db: db, idx: i, cm: cc, cq: cq, rpc: rc}
	c.checked.Store(db.failed.Load())
	l, err := c.open(ctx, create)
	if err != nil {
		c.close()
		return nil, Layout{}, err
	}
	return c, l, nil
}

// open creates the layout (create not nil), opens the ring and registers
// the slots.
func (c *conn) open(ctx context.Context, create *Layout) (Layout, error) {
	resp := make([]byte, c.db.cfg.MaxMessage)
	if create != nil {
		req := append(create.marshal(), byte(c.idx))
		if _, err := c.rpc.Call(ctx, MethodCreate, req, resp); err != nil {
			return Layout{}, c.mapErr("create", err)
		}
	}
	m, err := c.rpc.Call(ctx, MethodOpen, binary.LittleEndian.AppendUint64(nil, c.db.id), resp)
	if err != nil {
		return Layout{}, c.mapErr("open", err)
	}
	if m < openFixed {
		return Layout{}, fmt.Errorf("%w: a %d-byte open answer", ErrProtocol, m)
	}
	l, err := unmarshalLayout(resp[openFixed:m])
	if err != nil {
		return Layout{}, err
	}
	c.tables, c.tableKey = binary.LittleEndian.Uint64(resp), binary.LittleEndian.Uint32(resp[8:])
	c.logsKey, c.ringAddr = binary.LittleEndian.Uint32(resp[12:]), binary.LittleEndian.Uint64(resp[16:])
	c.ring = ringWriter{size: int(binary.LittleEndian.Uint32(resp[24:]))}
	c.sid = binary.LittleEndian.Uint32(resp[28:])
	c.size = max((MaxProbe-FirstProbe)*l.SlotSize(), c.db.cfg.MaxMessage+64)
	n := c.db.cfg.Slots
	if c.mr, err = c.db.pd.AllocMR(n*c.size, verbs.AccessLocalWrite); err != nil {
		return Layout{}, err
	}
	if c.tag, err = c.rpc.Router().Register(c.complete); err != nil {
		return Layout{}, err
	}
	c.free = make(chan *slot, n)
	for i := range n {
		s := &slot{i: i, buf: c.mr.Bytes()[i*c.size : (i+1)*c.size], addr: c.mr.Addr() + uint64(i*c.size), lkey: c.mr.LKey(), done: make(chan verbs.WC, 1)}
		c.slots = append(c.slots, s)
		c.free <- s
	}
	return l, nil
}

// mapErr types an RPC's error.
func (c *conn) mapErr(what string, err error) error {
	var re *rpc.RemoteError
	if errors.As(err, &re) {
		return fmt.Errorf("farm: node %d: %s: %s", c.idx, what, re.Msg)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: node %d: %s: %w", txn.ErrUnreachable, c.idx, what, err)
}

// complete hands a completion to its slot (the router's handler); an
// error status fails the connection, and with it every list in flight.
func (c *conn) complete(wc *verbs.WC) error {
	low := wc.ID & verbs.LowMask
	if i := int(low & slotMask); i < len(c.slots) && low>>slotBits == c.slots[i].gen.Load() {
		select {
		case c.slots[i].done <- *wc:
		default:
		}
	}
	if wc.Status != verbs.StatusSuccess {
		return fmt.Errorf("farm: node %d: %v: %w", c.idx, wc.Opcode, wc.Status.Err())
	}
	return nil
}

// acquire takes a free slot.
func (c *conn) acquire(ctx context.Context) (*slot, error) {
	select { // a failed connection hands out no slot, even a free one
	case <-c.rpc.Done():
		return nil, c.down()
	default:
	}
	select {
	case s := <-c.free:
		// Counted before the check: close, which sets closing before it
		// waits for held to drop to 0, either waits for this slot or is
		// seen here.
		c.held.Add(1)
		if c.closing.Load() {
			c.release(s)
			return nil, fmt.Errorf("%w: node %d: connection closed", txn.ErrUnreachable, c.idx)
		}
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.rpc.Done():
		return nil, c.down()
	}
}

// release returns a slot whose list completed.
func (c *conn) release(s *slot) {
	c.free <- s
	c.held.Add(-1)
}

// down is the error of a failed connection; it starts the reconnection.
func (c *conn) down() error {
	c.db.lost(c)
	if err := c.rpc.Err(); err != nil {
		return fmt.Errorf("%w: node %d: %w", txn.ErrUnreachable, c.idx, err)
	}
	return fmt.Errorf("%w: node %d: %w", txn.ErrUnreachable, c.idx, errDown)
}

// post posts wrs (the last signaled) for slot s.
func (c *conn) post(s *slot, wrs []verbs.SendWR) error {
	id := c.tag.ID(uint64(s.i) | s.gen.Add(1)<<slotBits)
	for i := range wrs {
		wrs[i].ID = id
	}
	wrs[len(wrs)-1].Flags |= verbs.FlagSignaled
	select {
	case <-s.done: // a stale completion
	default:
	}
	if err := verbs.PostAll(c.cm.QP(), wrs, c.rpc.Progress, c.rpc.Done()); err != nil {
		return fmt.Errorf("%w: node %d: %w", txn.ErrUnreachable, c.idx, err)
	}
	return nil
}

// wait waits for slot s's list. On success the slot is still the
// caller's (its buffer holds what the list READ): release it. On failure
// it is released once its list completes (or goes with the dead
// connection).
func (c *conn) wait(ctx context.Context, s *slot) error {
	select {
	case wc := <-s.done: // complete passes only this list's (its generation)
		if wc.Status != verbs.StatusSuccess {
			c.release(s) // the QP is in ERROR: nothing more lands in the slot
			return c.down()
		}
		return nil
	case <-c.rpc.Done():
		c.release(s)
		return c.down()
	case <-ctx.Done():
		go func() {
			select {
			case <-s.done:
			case <-c.rpc.Done():
			}
			c.release(s)
		}()
		return ctx.Err()
	}
}

// run posts wrs in slot s and waits for them; on failure the slot is
// taken care of (wait).
func (c *conn) run(ctx context.Context, s *slot, wrs []verbs.SendWR) error {
	if err := c.post(s, wrs); err != nil {
		c.release(s)
		return err
	}
	return c.wait(ctx, s)
}

// read READs n bytes of the tables at remote address addr and appends
// them to dst.
func (c *conn) read(ctx context.Context, addr uint64, n int, dst []byte) ([]byte, error) {
	s, err := c.acquire(ctx)
	if err != nil {
		return dst, err
	}
	s.sgl[0] = s.sge(0, n)
	s.wrs[0] = verbs.SendWR{Opcode: verbs.OpRead, SGL: s.sgl[:1], RemoteAddr: addr, RKey: c.tableKey}
	c.db.stats.reads.Add(1)
	if err := c.run(ctx, s, s.wrs[:1]); err != nil {
		return dst, err
	}
	dst = append(dst, s.buf[:n]...)
	c.release(s)
	return dst, nil
}

// readWords READs the n bytes at each of addrs (one list, one round trip)
// and appends them to dst, in order.
func (c *conn) readWords(ctx context.Context, addrs []uint64, n int, dst []byte) ([]byte, error) {
	s, err := c.acquire(ctx)
	if err != nil {
		return dst, err
	}
	if len(addrs)*n > c.size {
		c.release(s)
		return dst, fmt.Errorf("%w: %d validation reads at one node", txn.ErrTooLarge, len(addrs))
	}
	wrs, sgl := make([]verbs.SendWR, len(addrs)), make([]verbs.SGE, len(addrs))
	for i, a := range addrs {
		sgl[i] = s.sge(i*n, n)
		wrs[i] = verbs.SendWR{Opcode: verbs.OpRead, SGL: sgl[i : i+1], RemoteAddr: a, RKey: c.tableKey}
	}
	c.db.stats.reads.Add(1)
	if err := c.run(ctx, s, wrs); err != nil {
		return dst, err
	}
	dst = append(dst, s.buf[:len(addrs)*n]...)
	c.release(s)
	return dst, nil
}

// ringFullWait is the pause between READs of a full ring's consumed
// position.
const ringFullWait = 50 * time.Microsecond

// appendRecord writes record r into the client's log ring at the node,
// carrying the truncations this node is owed, and waits for the NIC's
// acknowledgement (not for the node's CPU).
func (c *conn) appendRecord(ctx context.Context, r *record) error {
	s, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	c.rmu.Lock()
	n := min(len(c.trunc), MaxTruncations)
	r.trunc = c.trunc[:n]
	body := appendRecord(s.buf[16:16:c.size], r)
	r.trunc = nil
	if len(body) > c.size-16 || recHeader+len(body) > c.ring.size/4 {
		c.rmu.Unlock()
		c.release(s)
		return fmt.Errorf("%w: a %d-byte log record", txn.ErrTooLarge, len(body))
	}
	length := (recHeader + len(body) + 7) &^ 7
	pos, skipAt, skip, need, ok := c.ring.reserve(length)
	for !ok {
		if err := c.refreshConsumed(ctx, need); err != nil {
			c.rmu.Unlock()
			c.release(s)
			return err
		}
		pos, skipAt, skip, need, ok = c.ring.reserve(length)
	}
	c.trunc = append(c.trunc[:0], c.trunc[n:]...)
	k := 0
	if skip {
		c.ring.putHeader(s.buf[8:], recHeader, skipAt)
		s.sgl[k] = s.sge(8, 8)
		s.wrs[k] = verbs.SendWR{Opcode: verbs.OpWrite, SGL: s.sgl[k : k+1], RemoteAddr: c.ringAddr + ringHead + skipAt%uint64(c.ring.size), RKey: c.logsKey}
		k++
	}
	off := c.ringAddr + ringHead + pos%uint64(c.ring.size)
	s.sgl[k] = s.sge(16, len(body))
	s.wrs[k] = verbs.SendWR{Opcode: verbs.OpWrite, SGL: s.sgl[k : k+1], RemoteAddr: off + recHeader, RKey: c.logsKey}
	k++
	c.ring.putHeader(s.buf[0:], length, pos)
	s.sgl[k] = s.sge(0, 8)
	s.wrs[k] = verbs.SendWR{Opcode: verbs.OpWrite, SGL: s.sgl[k : k+1], RemoteAddr: off, RKey: c.logsKey}
	k++
	c.db.stats.logWrites.Add(1)
	err = c.post(s, s.wrs[:k])
	c.rmu.Unlock()
	if err != nil {
		c.release(s)
		return err
	}
	if err := c.wait(ctx, s); err != nil {
		return err
	}
	c.release(s)
	return nil
}

// refreshConsumed READs the ring's consumed position until it reaches
// need (under c.rmu).
func (c *conn) refreshConsumed(ctx context.Context, need uint64) error {
	var b [8]byte
	for {
		s, err := c.acquire(ctx)
		if err != nil {
			return err
		}
		s.sgl[0] = s.sge(0, 8)
		s.wrs[0] = verbs.SendWR{Opcode: verbs.OpRead, SGL: s.sgl[:1], RemoteAddr: c.ringAddr, RKey: c.logsKey}
		c.db.stats.reads.Add(1)
		c.db.stats.ringWaits.Add(1)
		if err := c.run(ctx, s, s.wrs[:1]); err != nil {
			return err
		}
		copy(b[:], s.buf[:8])
		c.release(s)
		if c.ring.consumed = binary.LittleEndian.Uint64(b[:]); c.ring.consumed >= need {
			return nil
		}
		t := time.NewTimer(ringFullWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// addTrunc queues the truncation of transaction seq at this node.
func (c *conn) addTrunc(seq uint64) int {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.trunc = append(c.trunc, seq)
	return len(c.trunc)
}

// pendingTrunc is how many truncations wait for a record to carry them.
func (c *conn) pendingTrunc() int {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return len(c.trunc)
}

// lock calls MethodLock: status, and the versions found (lockOK) or the
// index of the write that failed.
func (c *conn) lock(ctx context.Context, req []byte, writes int) (byte, []uint64, int, error) {
	resp := make([]byte, 1+8*writes)
	c.db.stats.rpcs.Add(1)
	m, err := c.rpc.Call(ctx, MethodLock, req, resp)
	if err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			select {
			case <-c.rpc.Done():
				c.db.lost(c)
			default:
			}
		}
		return 0, nil, 0, c.mapErr("lock", err)
	}
	switch {
	case m >= 1 && resp[0] == lockOK && m == 1+8*writes:
		vs := make([]uint64, writes)
		for i := range vs {
			vs[i] = binary.LittleEndian.Uint64(resp[1+8*i:])
		}
		return lockOK, vs, 0, nil
	case m == 3 && resp[0] != lockOK:
		return resp[0], nil, int(binary.LittleEndian.Uint16(resp[1:])), nil
	}
	return 0, nil, 0, fmt.Errorf("%w: a %d-byte lock answer", ErrProtocol, m)
}

// close closes the connection; the slots' memory goes once every slot
// is back (or after a bound: a slot never given back keeps it).
func (c *conn) close() {
	c.once.Do(func() {
		c.closing.Store(true)
		c.rpc.Close()
		c.cm.Close()
		if c.mr != nil {
			c.rpc.Router().Unregister(c.tag)
			for deadline := time.Now().Add(time.Second); c.held.Load() > 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					slog.Debug("farm: connection closed with slots held; its buffers stay", "node", c.idx)
					c.cq.Destroy()
					return
				}
			}
			c.mr.Deregister()
		}
		c.cq.Destroy()
	})
}

// probe makes sure the connection still works when another of the
// client's failed since it was last known good: a 0-byte READ.
func (c *conn) probe(ctx context.Context) error {
	f := c.db.failed.Load()
	if c.checked.Load() >= f {
		return nil
	}
	if _, err := c.read(ctx, c.tables, 0, nil); err != nil {
		return err
	}
	c.checked.Store(f)
	return nil
}
