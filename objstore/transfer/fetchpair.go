package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// fpair is the fetcher's side of a pair: the transfers it asked for, by
// transfer id.
type fpair struct {
	*pair
	xmu      sync.Mutex
	xfers    map[uint32]*fxfer
	nextTID  atomic.Uint32
	inflight chan struct{} // a token per transfer the holder may still be serving

	readsPosted atomic.Int64 // READ work requests, pieces counted apart
}

// fxfer is one transfer in progress at the fetcher. The poller fills in
// what the holder sends (under mu) and signals sig; the fetching
// goroutine waits on sig and does the rest.
type fxfer struct {
	sig  chan struct{}
	wake chan struct{} // acquire's
	mu   sync.Mutex
	xstate
}

// xstate is an fxfer's state, guarded by its mu.
type xstate struct {
	tid       uint32
	id        object.ID
	sink      object.Sink
	gotData   bool
	proto     Protocol
	total     uint64
	got       uint64
	dst       []byte
	commit    func() error
	abort     func()
	createErr error
	discard   bool // chunks are dropped: cancelled, or nothing was created
	notFound  bool
	finished  bool // the holder sends nothing more for it (it left the map)
	info      bool // READ_INFO arrived
	addr      uint64
	rkey      uint32
	reading   bool // READs posted
	readsLeft int
	readErr   verbs.Status
	cancelled bool
}

var xferPool = sync.Pool{New: func() any { return &fxfer{sig: make(chan struct{}, 1), wake: make(chan struct{}, 1)} }}

func (x *fxfer) signal() {
	select {
	case x.sig <- struct{}{}:
	default:
	}
}

// reset readies a finished transfer for the pool.
func (x *fxfer) reset() {
	x.mu.Lock()
	x.xstate = xstate{}
	x.mu.Unlock()
	select {
	case <-x.sig:
	default:
	}
}

func newFPair(p *pair) *fpair {
	f := &fpair{pair: p, xfers: map[uint32]*fxfer{}, inflight: make(chan struct{}, maxInflight(p.cfg))}
	p.onMsg = f.handle
	p.onRead = f.readDone
	return f
}

func (f *fpair) lookup(tid uint32) *fxfer {
	f.xmu.Lock()
	defer f.xmu.Unlock()
	return f.xfers[tid]
}

// remove forgets a transfer the holder is done with and returns its
// in-flight token.
func (f *fpair) remove(tid uint32) {
	f.xmu.Lock()
	_, ok := f.xfers[tid]
	delete(f.xfers, tid)
	f.xmu.Unlock()
	if ok {
		<-f.inflight
	}
}

// handle is the fetcher's onMsg, on the poller.
func (f *fpair) handle(m *msg, _ int) (bool, error) {
	x := f.lookup(m.tid)
	if x == nil {
		return false, protoErr("%s for unknown transfer %d", msgName(m.typ), m.tid)
	}
	x.mu.Lock()
	if x.tid != m.tid { // x finished and was reused meanwhile
		x.mu.Unlock()
		return false, protoErr("%s for finished transfer %d", msgName(m.typ), m.tid)
	}
	err := f.handleLocked(x, m)
	done := x.finished
	x.mu.Unlock()
	if done {
		f.remove(m.tid)
	}
	x.signal()
	return true, err
}

func (f *fpair) handleLocked(x *fxfer, m *msg) error {
	switch m.typ {
	case msgData:
		if x.gotData || x.notFound {
			return protoErr("second answer to transfer %d", m.tid)
		}
		x.gotData, x.proto, x.total = true, m.proto, m.dataSize+m.metaSize
		if m.proto == Read && x.total == 0 {
			return protoErr("READ of an empty object")
		}
		if x.cancelled {
			x.discard = true
		} else {
			f.create(x, m)
		}
		x.finished = x.total == 0
	case msgChunk:
		n := uint64(len(m.payload))
		if !x.gotData || x.proto != SendRecv || m.off != x.got || n == 0 || n > x.total-x.got {
			return protoErr("CHUNK of %d bytes at %d for transfer %d (%d of %d bytes received)", n, m.off, m.tid, x.got, x.total)
		}
		if !x.discard {
			copy(x.dst[m.off:], m.payload)
			f.stats.copied.Add(int64(n))
		}
		x.got += n
		x.finished = x.got == x.total
	case msgNotFound:
		if x.gotData {
			return protoErr("NOT_FOUND after DATA for transfer %d", m.tid)
		}
		x.notFound, x.finished = true, true
	case msgReadInfo:
		if !x.gotData || x.proto != Read || x.info {
			return protoErr("READ_INFO out of turn for transfer %d", m.tid)
		}
		if m.length != x.total {
			return protoErr("READ_INFO of %d bytes for an object of %d", m.length, x.total)
		}
		x.info, x.addr, x.rkey = true, m.addr, m.rkey
		if x.discard {
			// Nobody READs: the holder may let go at once.
			f.mu.Lock()
			f.outbox = append(f.outbox, ctlMsg{typ: msgFin, tid: m.tid, status: finAborted})
			f.mu.Unlock()
			x.finished = true
		}
	default:
		return protoErr("%s at a fetcher", msgName(m.typ))
	}
	return nil
}

// create makes the object in the sink when DATA arrives (on the poller,
// so the chunks that follow find it).
func (f *fpair) create(x *fxfer, m *msg) {
	if x.total > uint64(int(^uint(0)>>1)) {
		x.createErr, x.discard = fmt.Errorf("%w: %d bytes", object.ErrBadSize, x.total), true
		return
	}
	dst, commit, abort, err := x.sink.Create(x.id, int(m.dataSize), int(m.metaSize))
	if err == nil && uint64(len(dst)) != x.total {
		abort()
		err = fmt.Errorf("transfer: sink created %d bytes for an object of %d", len(dst), x.total)
	}
	if err != nil {
		x.createErr, x.discard = err, true
		return
	}
	x.dst, x.commit, x.abort = dst, commit, abort
}

// readDone is the fetcher's onRead, on the poller.
func (f *fpair) readDone(tid uint32, st verbs.Status) {
	x := f.lookup(tid)
	if x == nil {
		return
	}
	x.mu.Lock()
	if x.tid != tid {
		x.mu.Unlock()
		return
	}
	x.readsLeft--
	if st != verbs.StatusSuccess {
		x.readErr = st
	}
	x.mu.Unlock()
	x.signal()
}

// failAll wakes every transfer when the pair fails.
func (f *fpair) failAll() {
	f.xmu.Lock()
	defer f.xmu.Unlock()
	for _, x := range f.xfers {
		x.signal()
	}
}

// fetch moves object id into sink over the pair, asking the holder for
// mode (threshold for Hybrid). It returns the protocol the holder chose
// and the object's size. Errors: wrapping object.ErrNotFound (the holder
// has no such object), the sink's Create error, ctx's error, or the
// pair's (object.ErrUnavailable, object.ErrProtocol).
func (f *fpair) fetch(ctx context.Context, id object.ID, sink object.Sink, mode Protocol, threshold uint64) (Protocol, int, error) {
	if !f.enter() {
		return 0, 0, f.failure()
	}
	defer f.exit()
	if f.reg == nil && f.cfg.Arena == nil {
		mode = SendRecv // this device cannot READ into an object in place
	}
	select {
	case f.inflight <- struct{}{}:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-f.done:
		return 0, 0, f.failure()
	}
	x := xferPool.Get().(*fxfer)
	tid := f.nextTID.Add(1)
	if tid == 0 {
		tid = f.nextTID.Add(1)
	}
	x.mu.Lock()
	x.id, x.sink, x.tid = id, sink, tid
	x.mu.Unlock()
	f.xmu.Lock()
	f.xfers[tid] = x
	f.xmu.Unlock()
	i, err := f.acquire(ctx, nil, x.wake)
	if err != nil {
		f.remove(tid)
		return 0, 0, err
	}
	if err := f.post(i, encodeTransfer(f.sendBuf(i), tid, id, mode, threshold)); err != nil {
		f.remove(tid)
		return 0, 0, err
	}
	var mr verbs.MR
	for {
		select {
		case <-x.sig:
		case <-ctx.Done():
			return 0, 0, f.abandon(x, mr, ctx.Err())
		case <-f.done:
			return 0, 0, f.abandon(x, mr, f.failure())
		}
		x.mu.Lock()
		switch {
		case x.notFound:
			x.mu.Unlock()
			x.reset()
			xferPool.Put(x)
			return 0, 0, fmt.Errorf("%w: at %s", object.ErrNotFound, f.peer)
		case x.createErr != nil:
			// The poller drops what still comes and lets the
			// holder go; x stays with it.
			err := x.createErr
			x.mu.Unlock()
			return 0, 0, err
		case x.gotData && x.proto == SendRecv && x.finished:
			x.mu.Unlock()
			return f.commit(x, SendRecv)
		case x.info && !x.reading:
			x.reading = true
			x.mu.Unlock()
			if mr, err = f.startRead(x); err != nil {
				return 0, 0, f.abandon(x, mr, err)
			}
		case x.reading && x.readsLeft == 0:
			x.mu.Unlock()
			return f.finishRead(x, mr)
		default:
			x.mu.Unlock()
		}
	}
}

// startRead registers the created object (unless it lies in the arena)
// and READs it from the holder, in pieces of at most the device's
// largest message. The region it returns, if any, is the caller's to
// deregister.
func (f *fpair) startRead(x *fxfer) (verbs.MR, error) {
	base, ok := inArena(f.cfg.Arena, x.dst)
	var lkey uint32
	var mr verbs.MR
	switch {
	case ok:
		lkey = f.cfg.Arena.LKey()
	case f.reg == nil:
		return nil, fmt.Errorf("%w: the device cannot register objects in place", verbs.ErrNotSupported)
	default:
		var err error
		if mr, err = f.reg.RegMR(x.dst, verbs.AccessLocalWrite); err != nil {
			return nil, fmt.Errorf("transfer: register object for READ: %w", err)
		}
		f.stats.registered()
		base, lkey = mr.Addr(), mr.LKey()
	}
	var wrs []verbs.SendWR
	for off := uint64(0); off < x.total; {
		n := min(x.total-off, f.maxMsg)
		wrs = append(wrs, verbs.SendWR{
			ID: kindRead | uint64(x.tid), Opcode: verbs.OpRead,
			SGL:        []verbs.SGE{{Addr: base + off, Length: uint32(n), LKey: lkey}},
			RemoteAddr: x.addr + off, RKey: x.rkey,
		})
		off += n
	}
	x.mu.Lock()
	x.readsLeft = len(wrs)
	x.mu.Unlock()
	f.readsPosted.Add(int64(len(wrs)))
	if err := f.qp.PostSend(wrs); err != nil {
		// Part of the list may be posted: the pair cannot tell
		// which READs will complete, so it goes.
		err = fmt.Errorf("%w: post READ: %w", object.ErrUnavailable, err)
		f.fail(err)
		return mr, err
	}
	return mr, nil
}

// finishRead ends a READ that completed: the region goes, the holder
// gets its FIN, the object is sealed.
func (f *fpair) finishRead(x *fxfer, mr verbs.MR) (Protocol, int, error) {
	f.deregister(mr)
	x.mu.Lock()
	st := x.readErr
	x.mu.Unlock()
	if st != verbs.StatusSuccess {
		return 0, 0, f.abandon(x, nil, fmt.Errorf("%w: READ: %v", object.ErrUnavailable, st))
	}
	if err := f.sendFin(x, finDone); err != nil {
		return 0, 0, f.abandon(x, nil, err)
	}
	f.remove(x.tid)
	return f.commit(x, Read)
}

// commit seals a complete object and recycles x (out of the map by now).
func (f *fpair) commit(x *fxfer, p Protocol) (Protocol, int, error) {
	commit, n := x.commit, int(x.total)
	x.reset()
	xferPool.Put(x)
	if err := commit(); err != nil {
		return 0, 0, fmt.Errorf("transfer: seal fetched object: %w", err)
	}
	return p, n, nil
}

// sendFin tells the holder a READ is over (status finDone or finAborted).
func (f *fpair) sendFin(x *fxfer, status uint8) error {
	i, err := f.acquire(f.ctx, nil, x.wake)
	if err != nil {
		return err
	}
	return f.post(i, encodeFin(f.sendBuf(i), x.tid, status))
}

func (f *fpair) deregister(mr verbs.MR) {
	if mr == nil {
		return
	}
	if err := mr.Deregister(); err != nil {
		f.log.Warn("transfer: deregister object", "err", err)
	}
	f.stats.registrations.Add(-1)
}

// abandon ends a transfer that will not complete (cause: ctx's error, the
// pair's failure, a failed READ): a READ in flight is waited for (its
// memory must not go while the device writes it), the region goes, the
// created object is aborted, and a holder waiting for FIN is told.
func (f *fpair) abandon(x *fxfer, mr verbs.MR, cause error) error {
	x.mu.Lock()
	x.cancelled, x.discard = true, true
	for x.reading && x.readsLeft > 0 && f.failure() == nil {
		x.mu.Unlock()
		select {
		case <-x.sig:
		case <-f.done:
		}
		x.mu.Lock()
	}
	// Once READ_INFO is in, the holder waits for a FIN that only this
	// goroutine will send.
	waiting := (x.reading || x.info) && !x.finished
	if x.abort != nil {
		x.abort()
		x.abort, x.dst = nil, nil
	}
	x.mu.Unlock()
	f.deregister(mr)
	if waiting {
		f.remove(x.tid)
		if f.failure() == nil {
			if err := f.sendFin(x, finAborted); err != nil {
				cause = errors.Join(cause, err)
			}
		}
	}
	// Otherwise x stays in the map: the poller discards what the holder
	// still sends and answers a READ_INFO with an aborting FIN.
	return cause
}
