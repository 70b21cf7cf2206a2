package transfer

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// hpair is the holder's side of a pair: Workers goroutines serve the
// TRANSFER requests, which wait in a queue of at most maxInflight
// (a fetcher keeps no more transfers than that in flight per pair; one
// that asks for more breaks the protocol and loses the pair). Every
// received slot is re-posted at once, so the credit window keeps moving
// in both directions whatever the workers do; a fetcher that never reads
// returns no credits, and the holder's workers stall (then fail the pair
// after FinTimeout) instead of allocating.
type hpair struct {
	*pair
	src   object.Source
	hmu   sync.Mutex
	ready *sync.Cond // a request was queued, or the pair failed
	queue []request  // a ring of maxInflight requests
	head  int
	count int
	fins  map[uint32]chan uint8 // READs waiting for their FIN
}

type request struct {
	tid       uint32
	id        object.ID
	mode      Protocol
	threshold uint64
}

// maxInflight is the most transfers a fetcher keeps in flight on a pair
// of cfg (both sides have the same Slots).
func maxInflight(cfg *Config) int { return 4 * cfg.Slots }

func newHPair(p *pair, src object.Source) *hpair {
	h := &hpair{pair: p, src: src, queue: make([]request, maxInflight(p.cfg)), fins: map[uint32]chan uint8{}}
	h.ready = sync.NewCond(&h.hmu)
	p.onMsg = h.handle
	p.onRead = func(uint32, verbs.Status) {}
	p.onFail = func() {
		h.hmu.Lock()
		h.ready.Broadcast()
		h.hmu.Unlock()
	}
	return h
}

// startWorkers starts the workers; call after start.
func (h *hpair) startWorkers() {
	h.loops.Add(h.cfg.Workers)
	for i := 0; i < h.cfg.Workers; i++ {
		go h.work()
	}
}

// handle is the holder's onMsg, on the poller.
func (h *hpair) handle(m *msg, _ int) (bool, error) {
	switch m.typ {
	case msgTransfer:
		h.hmu.Lock()
		defer h.hmu.Unlock()
		if h.count == len(h.queue) {
			return false, protoErr("more than %d transfers in flight", len(h.queue))
		}
		h.queue[(h.head+h.count)%len(h.queue)] = request{tid: m.tid, id: m.id, mode: m.mode, threshold: m.threshold}
		h.count++
		h.ready.Signal()
		return true, nil
	case msgFin:
		h.hmu.Lock()
		ch := h.fins[m.tid]
		delete(h.fins, m.tid)
		h.hmu.Unlock()
		if ch == nil {
			return false, protoErr("FIN for transfer %d, which is not waiting for one", m.tid)
		}
		ch <- m.status
		return true, nil
	}
	return false, protoErr("%s at a holder", msgName(m.typ))
}

// work serves requests until the pair fails.
func (h *hpair) work() {
	defer h.loops.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	wake := make(chan struct{}, 1)
	for {
		h.hmu.Lock()
		for h.count == 0 && h.failure() == nil {
			h.ready.Wait()
		}
		if h.failure() != nil {
			h.hmu.Unlock()
			return
		}
		r := h.queue[h.head]
		h.head = (h.head + 1) % len(h.queue)
		h.count--
		h.hmu.Unlock()
		h.serve(r, timer, wake)
	}
}

// serve answers one TRANSFER: NOT_FOUND, or DATA and the object by the
// protocol choose picks.
func (h *hpair) serve(r request, timer *time.Timer, wake chan struct{}) {
	h.busy.Add(1)
	defer h.busy.Add(-1)
	timer.Reset(h.cfg.FinTimeout)
	defer timer.Stop()
	obj, dataSize, release, err := h.src.Pin(r.id)
	if err != nil {
		if !errors.Is(err, object.ErrNotFound) {
			h.log.Warn("transfer: pin for a transfer", "id", r.id, "err", err)
		}
		h.stats.notFound.Add(1)
		h.send(timer.C, wake, func(b []byte) int { return encodeNotFound(b, r.tid) })
		return
	}
	h.stats.pins.Add(1)
	defer func() {
		if release != nil {
			release()
			h.stats.pins.Add(-1)
		}
	}()
	total := uint64(len(obj))
	proto := choose(r.mode, r.threshold, total)
	var mr verbs.MR
	var where remoteRef
	if proto == Read {
		if addr, ok := inArena(h.cfg.Arena, obj); ok {
			where = remoteRef{addr, h.cfg.Arena.RKey(), true}
		} else if h.reg != nil {
			if mr, err = h.reg.RegMR(obj, verbs.AccessRemoteRead); err == nil {
				h.stats.registered()
				where = remoteRef{mr.Addr(), mr.RKey(), true}
			}
		}
		if !where.ok {
			h.log.Debug("transfer: cannot register the object in place; sending it", "err", err)
			proto = SendRecv
		}
	}
	dSize, mSize := uint64(dataSize), total-uint64(dataSize)
	if !h.send(timer.C, wake, func(b []byte) int { return encodeData(b, r.tid, dSize, mSize, proto) }) {
		h.deregister(mr)
		h.stats.failed.Add(1)
		return
	}
	var ok bool
	if proto == Read {
		ok = h.serveRead(r.tid, mr, where, total, timer, wake)
	} else {
		ok = h.serveChunks(r.tid, obj, timer, wake, &release)
	}
	if !ok {
		h.stats.failed.Add(1)
		return
	}
	h.stats.done(proto, len(obj))
}

// serveChunks sends the object as CHUNKs and lets go of the pin as soon
// as the last byte is copied out.
func (h *hpair) serveChunks(tid uint32, obj []byte, timer *time.Timer, wake chan struct{}, release *func()) bool {
	room := h.cfg.SlotSize - chunkHdrLen
	for off := 0; off < len(obj); {
		i, err := h.acquire(h.ctx, timer.C, wake)
		if err != nil {
			h.stalled(err)
			return false
		}
		b := h.sendBuf(i)
		encodeChunkHeader(b, tid, uint64(off))
		n := copy(b[chunkHdrLen:chunkHdrLen+room], obj[off:])
		h.stats.copied.Add(int64(n))
		off += n
		if off == len(obj) {
			(*release)()
			*release = nil
			h.stats.pins.Add(-1)
		}
		if h.post(i, chunkHdrLen+n) != nil {
			return false
		}
	}
	return true
}

// remoteRef is where a fetcher READs an object: its address and rkey.
type remoteRef struct {
	addr uint64
	rkey uint32
	ok   bool
}

// serveRead hands the fetcher where to READ the object (its own
// registration mr, or the arena's) and waits for its FIN.
func (h *hpair) serveRead(tid uint32, mr verbs.MR, where remoteRef, total uint64, timer *time.Timer, wake chan struct{}) bool {
	defer h.deregister(mr)
	ch := make(chan uint8, 1)
	h.hmu.Lock()
	if h.fins[tid] != nil {
		h.hmu.Unlock()
		h.fail(protoErr("transfer id %d reused while its READ is in progress", tid))
		return false
	}
	h.fins[tid] = ch
	h.hmu.Unlock()
	if !h.send(timer.C, wake, func(b []byte) int { return encodeReadInfo(b, tid, where.addr, where.rkey, total) }) {
		return false
	}
	select {
	case st := <-ch:
		return st == finDone
	case <-h.done:
		return false
	case <-timer.C:
		h.fail(fmt.Errorf("%w: no FIN for transfer %d in %v", object.ErrUnavailable, tid, h.cfg.FinTimeout))
		return false
	}
}

// send sends one control message built by enc.
func (h *hpair) send(expire <-chan time.Time, wake chan struct{}, enc func(b []byte) int) bool {
	i, err := h.acquire(h.ctx, expire, wake)
	if err != nil {
		h.stalled(err)
		return false
	}
	return h.post(i, enc(h.sendBuf(i))) == nil
}

// stalled fails the pair when the fetcher held back its credits too long.
func (h *hpair) stalled(err error) {
	if errors.Is(err, errStalled) {
		h.fail(fmt.Errorf("%w: %w (%v)", object.ErrUnavailable, err, h.cfg.FinTimeout))
	}
}

func (h *hpair) deregister(mr verbs.MR) {
	if mr == nil {
		return
	}
	if err := mr.Deregister(); err != nil {
		h.log.Warn("transfer: deregister object", "err", err)
	}
	h.stats.registrations.Add(-1)
}
