package sock

import (
	"fmt"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// ctrlPath is the link's control QP: it writes credit entries into the
// peer's control ring, read indexes into the peer's shadow words, the
// "sleeping" word, and sends doorbells; it receives the peer's doorbells.
type ctrlPath struct {
	l      *link
	qp     verbs.QP // WRITEs into the peer's window
	bell   verbs.QP // doorbell SENDs, both ways
	sendCQ verbs.CQ
	recvCQ verbs.CQ

	mu     sync.Mutex // TX side
	write  uint64     // entries written to the peer's control ring
	wq, bq sqState    // the control and doorbell QPs' send queues
	wrs    [1]verbs.SendWR
	sge    [1]verbs.SGE
	wc     [16]verbs.WC

	rxMu   sync.Mutex // RX side: this side's control ring
	read   uint64
	synced uint64
}

// ctrlRecvs is the receives posted for doorbells: enough that a burst of
// them (each parked goroutine's request can draw one) never finds none —
// a doorbell that meets RNR waits for the shm device's retry timer.
const ctrlRecvs = 1024

func newCtrlPath(l *link) (*ctrlPath, error) {
	c := &ctrlPath{l: l}
	var err error
	if c.sendCQ, err = l.ep.dev.CreateCQ(2 * sqDepth); err != nil {
		return nil, fmt.Errorf("sock: control CQ: %w", err)
	}
	if c.recvCQ, err = l.ep.dev.CreateCQ(2 * ctrlRecvs); err != nil {
		c.destroy()
		return nil, fmt.Errorf("sock: control CQ: %w", err)
	}
	c.qp, err = l.ep.pd.CreateQP(verbs.QPInitAttr{
		Type: verbs.RC, SendCQ: c.sendCQ, RecvCQ: c.recvCQ,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64},
	})
	if err != nil {
		c.destroy()
		return nil, fmt.Errorf("sock: control QP: %w", err)
	}
	// Doorbells have a QP of their own: a QP with a SEND in flight sends
	// its later WRITEs the slow way on some transports (shm puts them in
	// its rings behind the SEND), and the control QP's WRITEs are on every
	// waiter's path.
	c.bell, err = l.ep.pd.CreateQP(verbs.QPInitAttr{
		Type: verbs.RC, SendCQ: c.sendCQ, RecvCQ: c.recvCQ,
		Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: ctrlRecvs, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		c.destroy()
		return nil, fmt.Errorf("sock: doorbell QP: %w", err)
	}
	return c, nil
}

func (c *ctrlPath) destroy() {
	for _, qp := range []verbs.QP{c.qp, c.bell} {
		if qp != nil {
			qp.Destroy()
		}
	}
	for _, cq := range []verbs.CQ{c.sendCQ, c.recvCQ} {
		if cq != nil {
			cq.Destroy()
		}
	}
}

// postRecvs posts the receives doorbells land in (they carry no payload).
func (c *ctrlPath) postRecvs() error {
	wrs := make([]verbs.RecvWR, ctrlRecvs)
	for i := range wrs {
		wrs[i].ID = uint64(i)
	}
	if err := c.bell.PostRecv(wrs); err != nil {
		return fmt.Errorf("sock: doorbell receives: %w", err)
	}
	return nil
}

// writeWord WRITEs the 8-byte value v to offset off of the peer's window,
// staged at the same offset of this side's staging region. The caller
// holds mu. signaled asks for a completion and waits for it.
func (c *ctrlPath) writeWord(off int, v uint64, signaled bool) error {
	l := c.l
	store64(l.stage.Bytes(), off, v)
	c.sge[0] = verbs.SGE{Addr: l.stage.Addr() + uint64(off), Length: 8, LKey: l.stage.LKey()}
	c.wrs[0] = verbs.SendWR{
		Opcode: verbs.OpWrite, Flags: verbs.FlagInline, SGL: c.sge[:],
		RemoteAddr: l.peer.winAddr + uint64(off), RKey: l.peer.winRKey,
	}
	return c.postOne(c.qp, signaled)
}

func (c *ctrlPath) postOne(qp verbs.QP, wait bool) error {
	q, tag := &c.wq, uint64(0)
	if qp == c.bell {
		q, tag = &c.bq, bellTag
	}
	if err := c.reap(q, 1, 0); err != nil {
		return err
	}
	q.unsignaled++
	if wait || q.unsignaled >= signalEvery {
		c.wrs[0].Flags |= verbs.FlagSignaled
		c.wrs[0].ID = tag | (q.posted + 1)
		q.unsignaled = 0
	}
	q.posted++
	err := qp.PostSend(c.wrs[:])
	c.wrs[0] = verbs.SendWR{}
	if err != nil {
		c.l.fail(fmt.Errorf("sock: control post: %w", err))
		return c.l.failedOr(ErrReset)
	}
	if wait {
		return c.reap(q, 0, q.posted)
	}
	return nil
}

// sqState counts one send queue's work requests: a request holds its slot
// until a signaled one at or after it completes.
type sqState struct {
	posted, completed uint64
	unsignaled        int
}

// bellTag marks the doorbell QP's work request IDs (the two QPs share a
// CQ; each counts its own).
const bellTag = 1 << 63

// reap polls the send CQ until q has room for n more requests and its
// request numbered upTo has completed.
func (c *ctrlPath) reap(q *sqState, n int, upTo uint64) error {
	for i := 0; ; i++ {
		k, err := c.sendCQ.Poll(c.wc[:])
		if err != nil {
			c.l.fail(fmt.Errorf("sock: control CQ: %w", err))
			return c.l.failedOr(ErrReset)
		}
		for _, wc := range c.wc[:k] {
			if wc.Status != verbs.StatusSuccess {
				c.l.fail(fmt.Errorf("sock: control QP: %v failed: %v", wc.Opcode, wc.Status))
				return c.l.failedOr(ErrReset)
			}
			if wc.ID&bellTag != 0 {
				c.bq.completed = max(c.bq.completed, wc.ID&^bellTag)
			} else {
				c.wq.completed = max(c.wq.completed, wc.ID)
			}
		}
		if q.posted-q.completed+uint64(n) <= sqDepth-signalEvery && q.completed >= upTo {
			return nil
		}
		if !c.l.alive() {
			return c.l.failedOr(ErrReset)
		}
		idle(i)
	}
}

// announceSleep tells the peer this side has parked goroutines: its next
// write into this side's window is followed by a doorbell. It returns once
// the word is in the peer's memory.
func (c *ctrlPath) announceSleep() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.l.alive() {
		return c.l.failedOr(ErrReset)
	}
	return c.writeWord(winSleepingOff, 1, true)
}

// parkRemote parks a goroutine that waits for something the peer writes:
// it asks the peer for a doorbell (announceSleep), returns at once if
// ready() reports the wait over, and otherwise parks (see park). While
// any goroutine is parked this way the doorbell loop renews the request
// after each doorbell, so the peer's later writes ring too.
func (l *link) parkRemote(ch <-chan struct{}, d *deadline, stop <-chan struct{}, parks int, ready func() bool) error {
	l.sleepers.Add(1)
	defer l.sleepers.Add(-1)
	if err := l.ctrl.announceSleep(); err != nil {
		return err
	}
	if ready() {
		return nil
	}
	return park(ch, d, stop, l.done, l.parkBase, l.parkMax, parks)
}

// ringIfAsleep sends the peer a doorbell if it asked for one. Call it after
// writing into the peer's window.
func (c *ctrlPath) ringIfAsleep() { c.ring(false) }

// ring sends the peer a doorbell if it asked for one, or always if force
// (a goroutine here waits for the peer to drain its rings).
func (c *ctrlPath) ring(force bool) {
	// The window is read under mu, which the link's release waits for.
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.l.alive() {
		return
	}
	win := c.l.win.Bytes()
	if !force && (load64(win, winSleepingOff) == 0 || !cas64(win, winSleepingOff, 1, 0)) {
		return
	}
	c.wrs[0] = verbs.SendWR{Opcode: verbs.OpSend}
	c.postOne(c.bell, false)
}

// writeShadow tells the peer how far this side consumed ring p.
func (c *ctrlPath) writeShadow(p int, read uint64) {
	c.mu.Lock()
	if c.l.alive() {
		c.writeWord(shadowOff(p), read, false)
	}
	c.mu.Unlock()
	c.ringIfAsleep()
}

// sendCredit writes a credit entry into the peer's control ring: the peer
// may have sent up to limit bytes (mod 2^32) on its connection id.
func (c *ctrlPath) sendCredit(id connID, limit uint32) error {
	c.mu.Lock()
	for i := 0; ; i++ {
		if !c.l.alive() {
			c.mu.Unlock()
			return c.l.failedOr(ErrReset)
		}
		sh := load64(c.l.win.Bytes(), winCtrlShadow)
		if sh > c.write {
			// The peer claims to have read entries never written.
			c.mu.Unlock()
			c.l.fail(fmt.Errorf("sock: %w: control read index %d beyond the %d entries sent", ErrProtocol, sh, c.write))
			return c.l.failedOr(ErrReset)
		}
		if c.write-sh < ctrlEntries {
			break
		}
		// The peer has not consumed its control ring; it will (its
		// writers poll it, and its doorbell loop drains it when rung).
		c.mu.Unlock()
		if i%64 == 63 {
			c.ring(true)
		}
		idle(i)
		c.mu.Lock()
	}
	off := c.l.rlay.ctrlOff() + 8*int(c.write%ctrlEntries)
	c.write++
	err := c.writeWord(off, encodeCredit(id, limit), false)
	c.mu.Unlock()
	c.ringIfAsleep()
	return err
}

// pollCredits drains this side's control ring into the connections'
// send limits, unless another goroutine is at it. It tells the peer its
// read index every quarter ring.
func (c *ctrlPath) pollCredits() {
	if !c.rxMu.TryLock() {
		return
	}
	defer c.rxMu.Unlock()
	c.drainCredits()
}

// pollCreditsAll drains the control ring, waiting for another poller to
// finish first: the doorbell loop must not skip entries that arrived after
// that poller looked.
func (c *ctrlPath) pollCreditsAll() {
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	c.drainCredits()
}

// drainCredits is pollCredits' work; the caller holds rxMu.
func (c *ctrlPath) drainCredits() {
	l := c.l
	if !l.alive() {
		return
	}
	win := l.win.Bytes()
	base := l.lay.ctrlOff()
	for {
		off := base + 8*int(c.read%ctrlEntries)
		w := load64(win, off)
		if w == 0 {
			break
		}
		id, limit, ok := decodeCredit(w)
		if !ok {
			l.fail(fmt.Errorf("sock: %w: control entry %#016x", ErrProtocol, w))
			return
		}
		if conn := l.lookup(id); conn != nil {
			conn.credit(limit)
		}
		store64(win, off, 0)
		c.read++
	}
	if c.read-c.synced >= ctrlEntries/4 {
		c.synced = c.read
		c.mu.Lock()
		if l.alive() {
			c.writeWord(winCtrlShadow, c.read, false)
		}
		c.mu.Unlock()
		c.ringIfAsleep()
	}
}

// doorbellLoop waits for the peer's doorbells and, on each, drains every
// ring and wakes whoever waits.
func (l *link) doorbellLoop() {
	defer l.closed.Done()
	c := l.ctrl
	wc := make([]verbs.WC, 64)
	repost := make([]verbs.RecvWR, 64)
	for {
		n, err := c.recvCQ.Poll(wc[:])
		if err != nil {
			l.fail(fmt.Errorf("sock: doorbell CQ: %w", err))
			return
		}
		if n == 0 {
			if err := c.recvCQ.ReqNotify(false); err != nil {
				l.fail(fmt.Errorf("sock: doorbell CQ: %w", err))
				return
			}
			if n, err = c.recvCQ.Poll(wc[:]); err == nil && n == 0 {
				err = c.recvCQ.Wait(l.ctx)
				if !l.alive() {
					return
				}
				if err != nil {
					l.fail(fmt.Errorf("sock: doorbell CQ: %w", err))
					return
				}
				continue
			}
			if err != nil {
				l.fail(fmt.Errorf("sock: doorbell CQ: %w", err))
				return
			}
		}
		for i := range wc[:n] {
			if wc[i].Status != verbs.StatusSuccess {
				if l.alive() {
					l.fail(fmt.Errorf("sock: doorbell: %v", wc[i].Status))
				}
				return
			}
			repost[i] = verbs.RecvWR{ID: wc[i].ID}
		}
		if err := c.bell.PostRecv(repost[:n]); err != nil {
			l.fail(fmt.Errorf("sock: doorbell receives: %w", err))
			return
		}
		l.pollAll()
		if l.sleepers.Load() > 0 {
			// The doorbell used up the peer's request; goroutines still
			// sleep: ask again, then look once more.
			if c.announceSleep() != nil {
				return
			}
			l.pollAll()
		}
	}
}
