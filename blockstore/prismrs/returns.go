package prismrs

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// giveBack queues a buffer no slot points to any more (replaced by this
// client's CAS, or allocated by a CAS that lost) for return to the
// replica.
func (r *rconn) giveBack(addr uint64) {
	if addr == r.info.Zero || addr == 0 {
		return
	}
	r.rmu.Lock()
	r.returns = append(r.returns, prism.Returned{Addr: addr, Class: r.info.Queue})
	full := len(r.returns) >= r.c.cfg.ReturnBatch
	r.rmu.Unlock()
	if full {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// returner returns queued buffers in batches, every 10 ms or when a
// batch is full: one FETCH_AND_ADD reserves return ring slots, one CAS
// per buffer fills them. On close it returns what is queued, once. A
// batch whose fills were never posted (the reservation failed: the
// connection is gone, or the replica did not answer) stays queued, for
// the next pass or the connection that replaces this one; a batch whose
// fills were posted but not answered is dropped, since returning a
// buffer twice would recycle it while a slot points to it.
func (r *rconn) returner() {
	defer close(r.retDone)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		last := false
		select {
		case <-r.retStop:
			last = true
		case <-r.kick:
		case <-t.C:
		}
		r.rmu.Lock()
		batch := r.returns
		r.returns = nil
		r.rmu.Unlock()
		for len(batch) > 0 && !r.dead.Load() {
			k := min(len(batch), returnMax)
			left, filled, err := r.returnBatch(batch[:k], last)
			if err != nil {
				if filled {
					batch = batch[k:]
				}
				break
			}
			if last {
				left = nil
			}
			batch = append(left, batch[k:]...)
			if len(left) > 0 {
				time.Sleep(time.Millisecond) // the replica is a lap behind
			}
		}
		if len(batch) > 0 {
			r.rmu.Lock()
			r.returns = append(batch, r.returns...)
			r.rmu.Unlock()
		}
		if last {
			return
		}
	}
}

// takeReturns empties the queue of buffers to return.
func (r *rconn) takeReturns() []prism.Returned {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	b := r.returns
	r.returns = nil
	return b
}

// returnBatch returns up to returnMax buffers, giving back those whose
// ring slot was still occupied; last: as the client closes. filled says
// whether the ring fills were posted (when it fails: they may have
// happened).
func (r *rconn) returnBatch(bufs []prism.Returned, last bool) (left []prism.Returned, filled bool, err error) {
	wait := 5 * time.Second
	if last {
		wait = time.Second // closing: a replica that does not answer keeps them
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := r.acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	wrs := make([]verbs.SendWR, len(bufs))
	prism.ReturnWRs(wrs, 0, r.info.RKey, r.info.Ring, len(bufs), s.sge(offTail, 8))
	if _, err := r.do(ctx, s, wrs[:1]); err != nil {
		return nil, false, err
	}
	first := binary.NativeEndian.Uint64(s.buf[offTail:])
	res := s.sge(offData, 8*len(bufs))
	prism.FillWRs(wrs, 0, r.info.RKey, r.info.Ring, int(r.info.RingSlots), first, bufs, res)
	if _, err := r.do(ctx, s, wrs); err != nil {
		return nil, true, err
	}
	defer r.release(s)
	for i, b := range bufs {
		if binary.NativeEndian.Uint64(s.buf[offData+8*i:]) != 0 {
			left = append(left, b)
		}
	}
	return left, true, nil
}

// acquire takes a free slot, waiting while all are in use.
func (r *rconn) acquire(ctx context.Context) (*slot, error) {
	select {
	case s := <-r.free:
		r.held.Add(1)
		return s, nil
	case <-r.rpc.Done():
		return nil, errDown
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
