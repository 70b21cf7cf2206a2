package ford

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// qpCap is the queue sizes of a client's connection to a node.
var qpCap = verbs.QPCap{MaxSendWR: 4096, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}

// node is a client's connection to one memory node: the region the
// node's connection reply described.
type node struct {
	idx  int
	addr string
	conn *cm.Conn
	base uint64 // the region's address
	size uint64
	key  uint32
}

// dialNode connects to the memory node at addr (its cm address) and
// takes its first region.
func dialNode(ctx context.Context, dev verbs.Device, pd verbs.PD, cq verbs.CQ, idx int, addr, token string) (*node, error) {
	c, err := cm.Dial(ctx, dev, addr, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: qpCap,
		PrivateData: memnode.Hello{Token: token}.Marshal()})
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, addr, err)
	}
	descs, err := cm.DecodeDescs(c.PeerPrivateData())
	if err != nil || len(descs) == 0 {
		c.Close()
		return nil, fmt.Errorf("%w: node %s describes no region (%v)", ErrLayout, addr, err)
	}
	return &node{idx: idx, addr: addr, conn: c, base: descs[0].Addr, size: descs[0].Len, key: descs[0].RKey}, nil
}

// A wr_id: bits 0–15 the coordinator's index in its DB, bits 16–47 the
// round's sequence number.
func wrID(c *coord, seq uint32) uint64 { return uint64(c.idx) | uint64(seq)<<16 }

// fabric is the direct issuer: lists posted on the nodes' QPs, every
// completion polled from one CQ by one goroutine and handed to its
// coordinator by wr_id.
type fabric struct {
	db     *DB
	cq     verbs.CQ
	poll   verbs.PollPolicy
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start starts the poller.
func (f *fabric) start() {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(1)
	go f.poller()
}

// stop stops the poller.
func (f *fabric) stop() {
	if f.cancel != nil {
		f.cancel()
		f.wg.Wait()
	}
}

// poller routes completions to their coordinators until stopped.
func (f *fabric) poller() {
	defer f.wg.Done()
	wcs := make([]verbs.WC, 64)
	for {
		n, err := verbs.PollWait(f.ctx, f.cq, wcs, f.poll)
		for i := range wcs[:n] {
			if c := f.db.coordAt(int(wcs[i].ID & 0xffff)); c != nil {
				select {
				case c.done <- wcs[i]:
				default: // a coordinator never has this many lists out
				}
			}
		}
		if err != nil {
			if f.ctx.Err() == nil {
				f.db.log.Error("ford: polling completions", "err", err)
			}
			return
		}
	}
}

// send posts lists with the round's wr_id, the last request of each
// signaled; it returns how many lists went out.
func (f *fabric) send(c *coord, seq uint32, lists []list) (int, error) {
	id := wrID(c, seq)
	for i, l := range lists {
		for j := range l.wrs {
			l.wrs[j].ID = id
			l.wrs[j].Flags &^= verbs.FlagSignaled
		}
		l.wrs[len(l.wrs)-1].Flags |= verbs.FlagSignaled
		nd := f.db.nodes[l.node]
		if nd == nil || c.v.out(l.node) {
			f.db.kickRenew()
			return i, fmt.Errorf("%w: node %d is out of epoch %d", txn.ErrUnreachable, l.node, c.v.conf.Epoch)
		}
		if err := verbs.PostAll(nd.conn.QP(), l.wrs, func() int { return 0 }, f.ctx.Done()); err != nil {
			f.db.kickRenew()
			return i, fmt.Errorf("%w: node %s: %w", txn.ErrUnreachable, nd.addr, err)
		}
	}
	return len(lists), nil
}

// round implements issuer.
func (f *fabric) round(ctx context.Context, c *coord, lists []list) error {
	if len(lists) == 0 {
		return nil
	}
	c.seq++
	seq := c.seq
	f.db.stats.lists.Add(uint64(len(lists)))
	f.db.stats.rounds.Add(1)
	posted, err := f.send(c, seq, lists)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	for left := posted; left > 0; {
		select {
		case wc := <-c.done:
			if uint32(wc.ID>>16) != seq {
				continue // a lazy post's, or a round given up on
			}
			left--
			if wc.Status != verbs.StatusSuccess && err == nil {
				err = fmt.Errorf("%w: %v: %w", txn.ErrUnreachable, wc.Opcode, wc.Status.Err())
				f.db.kickRenew()
			}
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			// The lists stay in flight: wait them out (bounded) before the
			// buffers are reused.
			if !c.drain(seq, left, drainWait) {
				c.broken = true
			}
			return err
		case <-f.ctx.Done():
			c.broken = true
			return fmt.Errorf("%w: connections closed", txn.ErrUnreachable)
		}
	}
	return err
}

// drainWait bounds the wait for a round given up on: a coordinator whose
// lists are not back by then is broken (never used again).
const drainWait = 100 * time.Millisecond

// drain waits for left more completions of round seq, at most d.
func (c *coord) drain(seq uint32, left int, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for left > 0 {
		select {
		case wc := <-c.done:
			if uint32(wc.ID>>16) == seq {
				left--
			}
		case <-t.C:
			return false
		}
	}
	return true
}

// begin implements issuer: nothing to enter.
func (f *fabric) begin(context.Context, *coord) error { return nil }

// end implements issuer.
func (f *fabric) end(*coord, bool) {}

// conflict implements issuer: FORD aborts on a conflict (txn.Run backs
// off between attempts).
func (f *fabric) conflict(*coord, int) bool { return false }

// post implements issuer.
func (f *fabric) post(c *coord, lists []list) error {
	c.seq++
	f.db.stats.lists.Add(uint64(len(lists)))
	_, err := f.send(c, c.seq, lists)
	return err
}
