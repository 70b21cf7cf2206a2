package sock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// A link joins two endpoints (two processes): one RC QP per partition plus
// a control QP, a window each side registers for the other to WRITE into,
// a staging region each side sends from, and a control stream. Every
// connection between the two endpoints rides on one link, in one of its
// partitions.
type link struct {
	ep     *endpoint
	log    *slog.Logger
	ctl    net.Conn
	ctlMu  sync.Mutex // serialises control-stream writes
	dialer bool

	local, peer *linkParams
	lay, rlay   windowLayout  // this side's window, the peer's
	mtu         int           // the link's record payload limit (the listener's MTU)
	slice       int           // largest record a Write sends
	batch       int           // records per turn on a partition (<= 0: no limit)
	spin        int64         // ns
	parkBase    time.Duration // first safety interval of a park (see park)
	parkMax     time.Duration // and the longest
	sleepers    atomic.Int32  // goroutines in parkRemote
	registered  bool          // counted in ep.released (set under ep.mu before start)

	win, stage verbs.MR
	parts      []*partition
	ctrl       *ctrlPath

	mu       sync.Mutex
	conns    []*Conn // by slot
	gens     []uint16
	free     []uint16
	dials    map[uint16]chan dialResult
	nextPart int
	nconns   int
	remote   Addr // dialers: the listener dialed

	failOnce sync.Once
	done     chan struct{}
	ctx      context.Context // cancelled when the link fails
	cancel   context.CancelFunc
	err      atomic.Pointer[error]
	closed   sync.WaitGroup // the link's goroutines
}

type dialResult struct {
	ack *synAckMsg
	rej *rejectMsg
}

// newLink creates the link's verbs resources: window, staging, QPs.
// Connecting them to the peer is connect's work.
func newLink(ep *endpoint, ctl net.Conn, dialer bool, parts int) (*link, error) {
	cfg := ep.cfg
	cfg.Partitions = parts
	l := &link{
		ep:     ep,
		ctl:    ctl,
		dialer: dialer,
		lay:    windowLayout{parts: parts, ringSize: cfg.RingSize},
		dials:  map[uint16]chan dialResult{},
		done:   make(chan struct{}),
		spin:   int64(max(cfg.Spin, 0)),
		batch:  cfg.BatchLimit,
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.log = ep.log.With("peer", ctl.RemoteAddr().String())
	var err error
	l.win, err = ep.pd.AllocMR(l.lay.size(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		return nil, fmt.Errorf("sock: window: %w", err)
	}
	store64(l.win.Bytes(), winMagicOff, winMagic)
	qpns := make([]uint32, cfg.Partitions+2)
	l.ctrl, err = newCtrlPath(l)
	if err != nil {
		l.release()
		return nil, err
	}
	qpns[cfg.Partitions] = l.ctrl.qp.QPN()
	qpns[cfg.Partitions+1] = l.ctrl.bell.QPN()
	for i := 0; i < cfg.Partitions; i++ {
		p, err := newPartition(l, i)
		if err != nil {
			l.release()
			return nil, err
		}
		l.parts = append(l.parts, p)
		qpns[i] = p.qp.QPN()
	}
	l.local = &linkParams{
		transport: ep.dev.Attr().Transport,
		device:    ep.dev.Address(),
		app:       ep.app,
		winAddr:   l.win.Addr(),
		winRKey:   l.win.RKey(),
		ringSize:  uint32(cfg.RingSize),
		parts:     uint8(cfg.Partitions),
		mtu:       uint32(cfg.MTU),
		qpns:      qpns,
	}
	return l, nil
}

// connect adopts the peer's parameters, allocates the staging region that
// mirrors the peer's rings, and connects the QPs.
func (l *link) connect(peer *linkParams) error {
	if peer.transport != l.local.transport {
		return fmt.Errorf("%w: peer transport %q, ours %q", ErrProtocol, peer.transport, l.local.transport)
	}
	if int(peer.parts) != len(l.parts) {
		return fmt.Errorf("%w: peer has %d partitions, we have %d", ErrProtocol, peer.parts, len(l.parts))
	}
	l.peer = peer
	// Over shm a doorbell is lost only while the shm device still sends
	// a WRITE through its rings instead of storing it directly (before
	// the peer's window is mapped here): the timer is a backstop.
	l.parkBase, l.parkMax = time.Millisecond, 100*time.Millisecond
	if peer.transport != "shm" {
		l.parkBase = 200 * time.Microsecond
	}
	l.rlay = windowLayout{parts: int(peer.parts), ringSize: int(peer.ringSize)}
	// The listener's MTU and slicing rule the link; each side also never
	// sends more than the other accepts.
	l.mtu = int(min(peer.mtu, l.local.mtu))
	// A record's payload and trailer go in one WRITE: at most the
	// device's largest message.
	maxWrite := int(min(l.ep.dev.Attr().MaxMsgSize, 1<<30)) - 2*hdrSize
	l.slice = min(l.mtu, maxWrite)
	if l.ep.cfg.NoSlicing {
		l.slice = min(int(peer.ringSize)/4, hdrMaxLen, maxWrite)
	}
	var err error
	l.stage, err = l.ep.pd.AllocMR(l.rlay.size(), verbs.AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("sock: staging: %w", err)
	}
	for i, p := range l.parts {
		if err := verbs.ConnectRC(p.qp, verbs.AccessRemoteWrite, peer.device, peer.qpns[i]); err != nil {
			return fmt.Errorf("sock: connect partition %d: %w", i, err)
		}
	}
	if err := verbs.ConnectRC(l.ctrl.qp, verbs.AccessRemoteWrite, peer.device, peer.qpns[len(l.parts)]); err != nil {
		return fmt.Errorf("sock: connect control QP: %w", err)
	}
	if err := verbs.ConnectRC(l.ctrl.bell, 0, peer.device, peer.qpns[len(l.parts)+1]); err != nil {
		return fmt.Errorf("sock: connect doorbell QP: %w", err)
	}
	return l.ctrl.postRecvs()
}

// start runs the link's goroutines: the control-stream reader and the
// doorbell loop (plus the partitions' goroutines in SP2C and SPSC).
func (l *link) start() {
	l.closed.Add(2)
	go l.readControl()
	go l.doorbellLoop()
	if l.ep.cfg.Mode != Direct {
		for _, p := range l.parts {
			p.startWorkers(l.ep.cfg.Mode)
		}
	}
}

// failed returns the error the link failed with, or nil.
func (l *link) failed() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail takes the link down: every connection on it is reset, the control
// stream closed, and the verbs resources freed once no goroutine is inside
// them.
func (l *link) fail(err error) {
	l.failOnce.Do(func() {
		l.err.Store(&err)
		if errors.Is(err, errLinkClosed) {
			l.log.Debug("sock: link closed")
		} else {
			l.log.Info("sock: link failed", "err", err)
		}
		close(l.done)
		l.cancel()
		l.ctl.Close()
		l.mu.Lock()
		conns := append([]*Conn(nil), l.conns...)
		dials := l.dials
		l.dials = map[uint16]chan dialResult{}
		l.mu.Unlock()
		for _, c := range conns {
			if c != nil {
				c.linkFailed()
				if c.onFree != nil {
					c.onFree()
				}
			}
		}
		for _, ch := range dials {
			close(ch)
		}
		go func() {
			l.closed.Wait()
			l.quiesce()
			l.release()
			if l.registered {
				l.ep.released.Done()
			}
			l.ep.forget(l)
		}()
	})
}

var errLinkClosed = errors.New("sock: link closed")

// quiesce waits until no goroutine is inside the link's memory: each path
// that touches the window or staging region holds one of these locks and
// checks l.done after taking it.
func (l *link) quiesce() {
	for _, p := range l.parts {
		<-p.tok // kept: later lockers see l.done instead
		waitFor(&p.rxMu)
	}
	waitFor(&l.ctrl.mu)
	waitFor(&l.ctrl.rxMu)
}

// waitFor waits until whoever holds mu lets it go.
func waitFor(mu *sync.Mutex) {
	mu.Lock()
	//lint:ignore SA2001 the empty critical section is the point: the holder has left
	mu.Unlock()
}

// release frees what newLink and connect made.
func (l *link) release() {
	for _, p := range l.parts {
		p.destroy()
	}
	if l.ctrl != nil {
		l.ctrl.destroy()
	}
	for _, mr := range []verbs.MR{l.stage, l.win} {
		if mr != nil {
			if err := mr.Deregister(); err != nil {
				l.log.Debug("sock: deregister", "err", err)
			}
		}
	}
}

// alive reports whether the link still works; paths call it after taking
// a lock that quiesce waits for.
func (l *link) alive() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// sendCtl writes one control message.
func (l *link) sendCtl(body []byte) error {
	l.ctlMu.Lock()
	defer l.ctlMu.Unlock()
	return writeMsg(l.ctl, body)
}

// readControl serves the control stream until it ends: a peer process that
// dies closes it, so its end is the link's end.
func (l *link) readControl() {
	defer l.closed.Done()
	buf := make([]byte, maxCtlMsg)
	for {
		body, err := readMsg(l.ctl, buf)
		if err != nil {
			if l.alive() {
				l.fail(fmt.Errorf("sock: control stream: %w", err))
			}
			return
		}
		if err := l.handleCtl(body); err != nil {
			l.fail(err)
			return
		}
	}
}

func (l *link) handleCtl(body []byte) error {
	switch body[0] {
	case msgSyn:
		if l.dialer {
			return fmt.Errorf("%w: SYN to a dialer", ErrProtocol)
		}
		m, err := decodeSyn(body[1:])
		if err != nil {
			return err
		}
		l.ep.acceptSyn(l, m)
		return nil
	case msgSynAck, msgReject:
		if !l.dialer {
			return fmt.Errorf("%w: SYNACK to a listener", ErrProtocol)
		}
		var res dialResult
		var id connID
		if body[0] == msgSynAck {
			m, err := decodeSynAck(body[1:])
			if err != nil {
				return err
			}
			if int(m.part) >= len(l.parts) {
				return fmt.Errorf("%w: partition %d", ErrProtocol, m.part)
			}
			res.ack, id = m, m.dialer
		} else {
			m, err := decodeReject(body[1:])
			if err != nil {
				return err
			}
			res.rej, id = m, m.dialer
		}
		l.mu.Lock()
		ch := l.dials[id.slot]
		if ch != nil && l.gens[id.slot] == id.gen {
			delete(l.dials, id.slot)
		} else {
			ch = nil
		}
		l.mu.Unlock()
		if ch == nil {
			// The dialer gave up (its context ended) before the answer
			// came: reset the connection the listener made for it.
			if res.ack != nil {
				go l.parts[res.ack.part].sendControl(kindRst, res.ack.acceptor)
			}
			return nil
		}
		ch <- res
		return nil
	}
	return fmt.Errorf("%w: control message type %d", ErrProtocol, body[0])
}

// allocSlot reserves a connection slot; the caller fills it with register.
func (l *link) allocSlot() (connID, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s uint16
	switch {
	case len(l.free) > 0:
		s = l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
	case len(l.conns) < MaxConns:
		s = uint16(len(l.conns))
		l.conns = append(l.conns, nil)
		l.gens = append(l.gens, 0)
	default:
		return connID{}, false
	}
	l.gens[s] = (l.gens[s] + 1) & hdrGenMask
	l.nconns++
	return connID{slot: s, gen: l.gens[s]}, true
}

func (l *link) register(id connID, c *Conn) {
	l.mu.Lock()
	l.conns[id.slot] = c
	l.mu.Unlock()
}

// freeSlot releases a slot once neither side will send to it again.
func (l *link) freeSlot(id connID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(id.slot) >= len(l.gens) || l.gens[id.slot] != id.gen {
		return
	}
	if c := l.conns[id.slot]; c != nil && c.onFree != nil {
		defer c.onFree()
	}
	l.conns[id.slot] = nil
	l.gens[id.slot] = (l.gens[id.slot] + 1) & hdrGenMask // records still in flight for it are dropped
	l.free = append(l.free, id.slot)
	l.nconns--
	if l.nconns == 0 && !l.dialer {
		// A listener's link with no connections stays for the dialer to
		// reuse — unless the listener is closed: then it ends. (An
		// atomic: Listener.Close takes ep.mu, then each link's mu.)
		if l.ep.closed.Load() {
			go l.fail(errLinkClosed)
		}
	}
}

// lookup returns the connection a record names, or nil.
func (l *link) lookup(id connID) *Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(id.slot) >= len(l.conns) || l.gens[id.slot] != id.gen {
		return nil
	}
	return l.conns[id.slot]
}

// pickPartition assigns a new connection to a partition, round-robin.
func (l *link) pickPartition() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.nextPart
	l.nextPart = (l.nextPart + 1) % len(l.parts)
	return p
}

// dial opens a connection on the link: SYN, then SYNACK or REJECT.
func (l *link) dial(ctx context.Context, service string, rcvbuf int) (*Conn, error) {
	id, ok := l.allocSlot()
	if !ok {
		return nil, fmt.Errorf("sock: %d connections on the link: %w", MaxConns, ErrRefused)
	}
	ch := make(chan dialResult, 1)
	l.mu.Lock()
	l.dials[id.slot] = ch
	l.mu.Unlock()
	c := newConn(l, id, rcvbuf)
	l.register(id, c)
	if err := l.sendCtl(encodeSyn(&synMsg{dialer: id, rcvbuf: uint32(rcvbuf), service: service})); err != nil {
		l.fail(fmt.Errorf("sock: control stream: %w", err))
	}
	select {
	case res, ok := <-ch:
		switch {
		case !ok:
			l.freeSlot(id)
			return nil, fmt.Errorf("sock: dial: %w", l.failedOr(ErrReset))
		case res.rej != nil:
			l.freeSlot(id)
			return nil, fmt.Errorf("sock: dial %s: %s: %w", service, res.rej.reason, ErrRefused)
		}
		c.established(res.ack.acceptor, int(res.ack.part), res.ack.rcvbuf)
		return c, nil
	case <-ctx.Done():
		l.mu.Lock()
		_, pending := l.dials[id.slot]
		delete(l.dials, id.slot)
		l.mu.Unlock()
		if !pending {
			// The answer raced the cancellation: take it, then close.
			if res, ok := <-ch; ok && res.ack != nil {
				c.established(res.ack.acceptor, int(res.ack.part), res.ack.rcvbuf)
				c.Close()
				return nil, ctx.Err()
			}
		}
		// The listener may still accept: it will get our RST once the
		// slot's next occupant or the link's end tells it the slot is
		// stale. Keep the slot out of use until then by leaving its
		// generation advanced.
		l.freeSlot(id)
		return nil, ctx.Err()
	}
}

func (l *link) failedOr(def error) error {
	if err := l.failed(); err != nil && !errors.Is(err, errLinkClosed) {
		return errors.Join(ErrReset, err)
	}
	return def
}
