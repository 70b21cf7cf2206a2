package prismtx

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// errReturnerBroken: the returner stopped (returner.broken).
var errReturnerBroken = errors.New("prismtx: returner stopped")

// returnBatch is how many buffers one pass returns at most, and how many
// queued buffers wake the returner before its 10 ms tick.
const (
	returnMax   = 64
	returnBatch = 32
)

// returner gives version buffers back to a node through its return ring,
// in batches, in the background: the versions a client's install
// replaced, and the pending versions of its aborted transactions. A
// buffer's size class is not in the slot that pointed to it, so each
// batch first READs the buffers' item headers (unreachable now, and not
// recycled before the ring gives them back, so still intact), then
// reserves ring slots (one FETCH_AND_ADD) and fills them (one CAS each).
type returner struct {
	c    *conn
	slot int // the connection's slot the returner posts with

	mu    sync.Mutex
	queue []uint64
	kick  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	wrs   [returnMax]verbs.SendWR
	sgl   [returnMax]verbs.SGE
	// broken: a list of the returner's did not answer in time; its late
	// completion would be taken for the next one's, so the returner stops
	// (the buffers it would have returned stay lost to the node).
	broken bool
}

func (r *returner) start(c *conn, slot int) {
	r.c, r.slot = c, slot
	r.kick, r.quit, r.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go r.loop()
}

// add queues buffer addr.
func (r *returner) add(addr uint64) {
	r.mu.Lock()
	r.queue = append(r.queue, addr)
	full := len(r.queue) >= returnBatch
	r.mu.Unlock()
	if full {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// stop returns what is queued (bounded by a second) and stops.
func (r *returner) stop() {
	if r.done == nil {
		return
	}
	r.once.Do(func() { close(r.quit) })
	<-r.done
}

func (r *returner) loop() {
	defer close(r.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		last := false
		select {
		case <-r.quit:
			last = true
		case <-r.kick:
		case <-t.C:
		}
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		r.mu.Unlock()
		for len(batch) > 0 {
			k := min(len(batch), returnMax)
			left, err := r.returnOnce(batch[:k], last)
			if err != nil {
				break // the connection is gone, or the node does not answer: the buffers stay lost
			}
			batch = append(left, batch[k:]...)
			if len(left) > 0 {
				if last {
					break
				}
				time.Sleep(time.Millisecond) // the node is a lap behind
			}
		}
		if last {
			return
		}
	}
}

// run posts the returner's list of n requests and waits for it.
func (r *returner) run(ctx context.Context, n int) error {
	ch := &chain{c: r.c, i: r.slot, buf: r.c.mr.Bytes()[r.slot*chainBuf : (r.slot+1)*chainBuf],
		addr: r.c.mr.Addr() + uint64(r.slot*chainBuf), wrs: r.wrs[:n], sgl: r.sgl[:n]}
	if err := ch.post(); err != nil {
		return err
	}
	_, err := ch.wait(ctx)
	if ctx.Err() != nil {
		r.broken = true
		slog.Warn("prismtx: a node did not answer the return of versions; this connection returns no more", "node", r.c.addr)
		return ctx.Err()
	}
	return err
}

// returnOnce returns up to returnMax buffers; left are those whose ring
// slot was still occupied.
func (r *returner) returnOnce(bufs []uint64, last bool) (left []uint64, err error) {
	if r.broken {
		return nil, errReturnerBroken
	}
	wait := 5 * time.Second
	if last {
		wait = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := r.c
	base := r.slot * chainBuf
	buf := c.mr.Bytes()[base : base+chainBuf]
	sge := func(off, n int) verbs.SGE {
		return verbs.SGE{Addr: c.mr.Addr() + uint64(base+off), Length: uint32(n), LKey: c.mr.LKey()}
	}
	// The headers: 16 bytes per buffer from offItem.
	for i, a := range bufs {
		r.sgl[i] = sge(offItem+itemHead*i, itemHead)
		r.wrs[i] = verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: a, RKey: c.lay.RKey, SGL: r.sgl[i : i+1]}
	}
	if err := r.run(ctx, len(bufs)); err != nil {
		return nil, err
	}
	ret := make([]prism.Returned, 0, len(bufs))
	for i, a := range bufs {
		it, ok := readHead(buf[offItem+itemHead*i:])
		if !ok {
			continue // not an item of ours: never return what we cannot size
		}
		ret = append(ret, prism.Returned{Addr: a, Class: class(it.size())})
	}
	if len(ret) == 0 {
		return nil, nil
	}
	prism.ReturnWRs(r.wrs[:], 0, c.lay.RKey, c.lay.Ring, len(ret), sge(offTail, 8))
	if err := r.run(ctx, 1); err != nil {
		return nil, err
	}
	first := binary.NativeEndian.Uint64(buf[offTail:])
	prism.FillWRs(r.wrs[:], 0, c.lay.RKey, c.lay.Ring, int(c.lay.RingSlots), first, ret, sge(offItem, 8*len(ret)))
	for i := range ret {
		r.wrs[i].SGL = r.sgl[i : i+1]
		r.sgl[i] = sge(offItem+8*i, 8)
	}
	if err := r.run(ctx, len(ret)); err != nil {
		return nil, err
	}
	for i, b := range ret {
		if binary.NativeEndian.Uint64(buf[offItem+8*i:]) != 0 {
			left = append(left, b.Addr)
		}
	}
	return left, nil
}
