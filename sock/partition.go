package sock

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// A partition is one ring in each direction plus the QP that writes into
// the peer's: the thesis' multiplexing unit. Its TX side is owned by
// whoever holds tok (a one-token channel: waiting goroutines get it in
// FIFO order, so a connection that ends its turn goes behind the others);
// its RX side by whoever holds rxMu.
type partition struct {
	l   *link
	idx int
	qp  verbs.QP
	cq  verbs.CQ

	// TX, under tok.
	tok        chan struct{}
	write      uint64 // next byte of the peer's ring (monotonic)
	posted     uint64 // work requests posted
	completed  uint64 // work requests known complete (by signaled ones)
	unsignaled int
	wrs        [4]verbs.SendWR
	sge        [4]verbs.SGE
	wc         [16]verbs.WC
	spaceWait  waitq // goroutines waiting for the peer to free ring space

	// RX, under rxMu.
	rxMu     sync.Mutex
	read     uint64 // next byte of this side's ring (monotonic)
	syncWant bool

	// SP2C / SPSC.
	sched  scheduler
	rxWake chan struct{} // the RX goroutine's (SP2C): records came by doorbell
}

const (
	sqDepth     = 1024
	signalEvery = 128
)

func newPartition(l *link, idx int) (*partition, error) {
	p := &partition{l: l, idx: idx, tok: make(chan struct{}, 1), rxWake: make(chan struct{}, 1)}
	p.tok <- struct{}{}
	var err error
	if p.cq, err = l.ep.dev.CreateCQ(2 * sqDepth); err != nil {
		return nil, fmt.Errorf("sock: partition CQ: %w", err)
	}
	p.qp, err = l.ep.pd.CreateQP(verbs.QPInitAttr{
		Type: verbs.RC, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64},
	})
	if err != nil {
		p.cq.Destroy()
		p.cq = nil
		return nil, fmt.Errorf("sock: partition QP: %w", err)
	}
	p.sched.init()
	return p, nil
}

func (p *partition) destroy() {
	if p.qp != nil {
		p.qp.Destroy()
	}
	if p.cq != nil {
		p.cq.Destroy()
	}
}

// lock takes the partition's TX side; it gives up when stop is closed.
func (p *partition) lock(stop <-chan struct{}, timer <-chan time.Time) bool {
	select {
	case <-p.tok:
		return true
	default:
	}
	select {
	case <-p.tok:
		return true
	case <-stop:
		return false
	case <-timer:
		return false
	case <-p.l.done:
		return false
	}
}

func (p *partition) unlock() { p.tok <- struct{}{} }

// shadow is this side's view of how far the peer has consumed ring p.
func (p *partition) shadow() uint64 { return load64(p.l.win.Bytes(), shadowOff(p.idx)) }

// room reports whether a record of rec bytes fits now; pad is the bytes to
// skip first to keep the record contiguous.
func (p *partition) room(rec int) (pad int, ok bool) {
	r := uint64(p.l.rlay.ringSize)
	pos := p.write % r
	if r-pos < uint64(rec) {
		pad = int(r - pos)
	}
	sh := p.shadow()
	if sh > p.write {
		return pad, false // a lying peer: never free more than was written
	}
	return pad, p.write+uint64(pad+rec+8)-sh <= r // 8: the trailer
}

// waitRoom waits, holding the partition, until a record of rec bytes fits.
// It fails when the link fails, stop closes or the deadline passes.
func (p *partition) waitRoom(rec int, d *deadline, stop <-chan struct{}) (int, error) {
	start := time.Now()
	parks := 0
	for i := 0; ; i++ {
		if sh := p.shadow(); sh > p.write {
			// The peer claims to have read what was never written.
			p.l.fail(fmt.Errorf("sock: partition %d: %w: read index %d beyond the %d bytes sent", p.idx, ErrProtocol, sh, p.write))
			return 0, p.l.failedOr(ErrReset)
		}
		if pad, ok := p.room(rec); ok {
			return pad, nil
		}
		if !p.l.alive() {
			return 0, p.l.failedOr(ErrReset)
		}
		// The peer's RX side answers a sync request by writing its read
		// index; the last record sent asked (the ring is over half full).
		if time.Since(start) < time.Duration(p.l.spin) || i < 8 {
			runtime.Gosched()
			continue
		}
		ch := p.spaceWait.wait()
		if _, ok := p.room(rec); ok {
			continue
		}
		if err := p.l.parkRemote(ch, d, stop, parks, func() bool {
			if _, ok := p.room(rec); ok {
				return true
			}
			// The peer's application may not be polling its rings at
			// all (it does not read): its doorbell loop drains them
			// when rung.
			p.l.ctrl.ring(true)
			return false
		}); err != nil {
			return 0, err
		}
		parks++
	}
}

// post sends one record: its payload (a then b, h.n bytes in all) into the
// peer's ring p at the current write index, then its header. The caller
// holds tok and has checked room. pad > 0 means the record does not fit
// before the ring's end: it goes to the ring's start and a pad record at
// the current index says so.
//
// The receiver finds each header at the end of the record before it, so
// the word there must be zero until the header is written (the ring holds
// old payload bytes from the previous lap): every record carries a zero
// trailer word after itself, written with or before its payload and
// before its header. The next record's header later overwrites it.
func (p *partition) post(h header, pad int, a, b []byte) error {
	l := p.l
	if !l.alive() {
		return l.failedOr(ErrReset)
	}
	r := uint64(l.rlay.ringSize)
	base := l.rlay.ringOff(p.idx)
	stage := l.stage.Bytes()
	n := 0
	padOff := base + int(p.write%r)
	if pad > 0 {
		p.write += uint64(pad)
	}
	rec := recordSize(h.n)
	h.sync = p.write+uint64(rec)-p.shadow() > r/2
	pos := int(p.write % r)
	off := base + pos
	end := pos + rec // the trailer's position
	if end < int(r) {
		store64(stage, base+end, 0)
	}
	if h.n > 0 {
		dst := stage[off+hdrSize : off+hdrSize+h.n]
		copy(dst[copy(dst, a):], b)
		length := rec - hdrSize // the payload and its alignment padding
		if end < int(r) {
			length += 8 // and the trailer
		}
		p.sge[n] = verbs.SGE{Addr: l.stage.Addr() + uint64(off+hdrSize), Length: uint32(length), LKey: l.stage.LKey()}
		p.wrs[n] = verbs.SendWR{
			Opcode: verbs.OpWrite, SGL: p.sge[n : n+1],
			RemoteAddr: l.peer.winAddr + uint64(off+hdrSize), RKey: l.peer.winRKey,
		}
		n++
	}
	if end == int(r) {
		store64(stage, base, 0)
		p.wrs[n] = p.wordWR(base, n)
		n++
	} else if h.n == 0 {
		p.wrs[n] = p.wordWR(base+end, n)
		n++
	}
	store64(stage, off, h.encode())
	p.wrs[n] = p.wordWR(off, n)
	n++
	if pad > 0 {
		// Last: the receiver skips to the start only when the record
		// there is complete.
		store64(stage, padOff, header{kind: kindPad}.encode())
		p.wrs[n] = p.wordWR(padOff, n)
		n++
	}
	p.write += uint64(rec)
	raceRelease()
	return p.postWRs(n)
}

// wordWR is an inline 8-byte WRITE of the staged word at off to the same
// offset of the peer's window; it uses p.sge[i].
func (p *partition) wordWR(off, i int) verbs.SendWR {
	l := p.l
	p.sge[i] = verbs.SGE{Addr: l.stage.Addr() + uint64(off), Length: 8, LKey: l.stage.LKey()}
	return verbs.SendWR{
		Opcode: verbs.OpWrite, Flags: verbs.FlagInline,
		SGL:        p.sge[i : i+1],
		RemoteAddr: l.peer.winAddr + uint64(off), RKey: l.peer.winRKey,
	}
}

// postWRs posts p.wrs[:n], signalling every signalEvery work requests and
// reaping completions so the send queue never overflows.
func (p *partition) postWRs(n int) error {
	if err := p.reap(n); err != nil {
		return err
	}
	p.unsignaled += n
	if p.unsignaled >= signalEvery {
		p.wrs[n-1].Flags |= verbs.FlagSignaled
		p.wrs[n-1].ID = p.posted + uint64(n)
		p.unsignaled = 0
	}
	p.posted += uint64(n)
	err := p.qp.PostSend(p.wrs[:n])
	for i := range p.wrs[:n] {
		p.wrs[i] = verbs.SendWR{}
	}
	if err != nil {
		err = fmt.Errorf("sock: post: %w", err)
		p.l.fail(err)
		return p.l.failedOr(ErrReset)
	}
	return nil
}

// reap polls the partition's CQ; it waits while the send queue has no room
// for n more work requests.
func (p *partition) reap(n int) error {
	for i := 0; ; i++ {
		k, err := p.cq.Poll(p.wc[:])
		if err != nil {
			p.l.fail(fmt.Errorf("sock: partition CQ: %w", err))
			return p.l.failedOr(ErrReset)
		}
		for _, wc := range p.wc[:k] {
			if wc.Status != verbs.StatusSuccess {
				p.l.fail(fmt.Errorf("sock: partition %d: WRITE failed: %v", p.idx, wc.Status))
				return p.l.failedOr(ErrReset)
			}
			p.completed = max(p.completed, wc.ID)
		}
		if p.posted-p.completed+uint64(n) <= sqDepth-signalEvery {
			return nil
		}
		if !p.l.alive() {
			return p.l.failedOr(ErrReset)
		}
		idle(i)
	}
}

// sendControl sends a FIN or RST record for the peer's connection id.
func (p *partition) sendControl(k kind, id connID) error {
	if !p.lock(nil, nil) {
		return p.l.failedOr(ErrReset)
	}
	defer p.unlock()
	pad, err := p.waitRoom(hdrSize, nil, nil)
	if err != nil {
		return err
	}
	if err := p.post(header{kind: k, id: id}, pad, nil, nil); err != nil {
		return err
	}
	p.l.ctrl.ringIfAsleep()
	return nil
}

// sendControlSoon sends a FIN or RST without waiting: at once when the
// partition is free and the peer's ring has room, otherwise from a
// goroutine (a Close returns at once, as a TCP socket's does, even toward
// a stopped peer whose ring is full; the record follows the data already
// sent, in order).
func (p *partition) sendControlSoon(k kind, id connID) {
	select {
	case <-p.tok:
		if pad, ok := p.room(hdrSize); ok && p.l.alive() {
			err := p.post(header{kind: k, id: id}, pad, nil, nil)
			p.unlock()
			if err == nil {
				p.l.ctrl.ringIfAsleep()
			}
			return
		}
		p.unlock()
	default:
	}
	go p.sendControl(k, id)
}

// idle is the back-off of a short wait: yield, then sleep a little.
func idle(i int) {
	if i < 64 {
		runtime.Gosched()
		return
	}
	time.Sleep(time.Duration(min(i-63, 50)) * 10 * time.Microsecond)
}
