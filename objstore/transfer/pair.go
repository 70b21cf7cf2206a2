package transfer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/objstore/object"
	"github.com/rdmakit/rdmakit/verbs"
)

// Work-request IDs: the kind in the top two bits, an index below.
const (
	kindRecv  uint64 = 0 << 62 // a receive slot's index
	kindSend  uint64 = 1 << 62 // a send buffer's index (slots = the control buffer)
	kindRead  uint64 = 2 << 62 // a fetcher's READ: the transfer id
	kindProbe uint64 = 3 << 62
	kindMask  uint64 = 3 << 62
)

// pair is one side of a connected RC QP between a fetcher and a holder,
// with its own PD (so an object's rkey works through this QP only), CQ,
// receive slots, send buffers and credit window. The poller goroutine
// polls the CQ, decodes what arrives and hands each message to the role
// (onMsg: fetcher.go's or holder.go's); transfers post their SENDs
// through acquire and post.
type pair struct {
	cfg   *Config
	log   *slog.Logger
	stats *counters
	peer  string

	pd        verbs.PD
	sharedPD  bool               // pd is Config.ArenaPD, not the pair's own
	reg       verbs.MemRegistrar // pd, when it can register objects in place
	cq        verbs.CQ
	conn      *cm.Conn
	qp        verbs.QP
	recvMR    verbs.MR // Slots receive slots of SlotSize bytes
	sendMR    verbs.MR // Slots send buffers and the control buffer
	probeMR   verbs.MR // 8 bytes the peer may READ: the liveness probe
	peerProbe cm.MRDesc
	maxMsg    uint64
	ackAt     int

	recvWRs  []verbs.RecvWR
	recvSGEs []verbs.SGE
	sendWRs  []verbs.SendWR
	sendSGEs []verbs.SGE
	probeWR  []verbs.SendWR

	ctx    context.Context // ends when the pair fails
	cancel context.CancelFunc
	done   chan struct{}
	freed  chan struct{} // closed once the resources are released

	mu      sync.Mutex
	err     error           // why the pair failed; set before done closes
	credits int             // SENDs the peer has slots for
	owed    int             // slots re-posted that the peer has not been told of
	free    []int           // free send buffers
	waitq   []chan struct{} // goroutines waiting in acquire, each on its own channel
	outbox  []ctlMsg        // control messages the poller sends when it has credit

	busy     atomic.Int32 // transfers in progress: probe the peer meanwhile
	lastRecv atomic.Int64 // unix nanoseconds of the last message received
	probing  atomic.Bool

	rx     msg // the message being handled, the poller's (so none escapes per message)
	onMsg  func(m *msg, slot int) (repost bool, err error)
	onRead func(tid uint32, st verbs.Status)
	onFail func()

	users sync.WaitGroup // transfers using the pair's PD (they free their own regions)
	loops sync.WaitGroup // poller, prober, holder workers
}

// ctlMsg is a control message the poller sends inline.
type ctlMsg struct {
	typ    uint8
	tid    uint32
	status uint8
}

// newPair allocates a pair's PD, CQ and buffers on dev; connect (cm.Dial
// or Request.Accept with p.options()) makes the QP.
func newPair(dev verbs.Device, cfg *Config, stats *counters, peer string) (*pair, error) {
	p := &pair{cfg: cfg, stats: stats, peer: peer, ackAt: cfg.ackThreshold(), maxMsg: dev.Attr().MaxMsgSize}
	p.log = cfg.Logger.With("objstore/transfer", "pair", "peer", peer)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.done = make(chan struct{})
	p.freed = make(chan struct{})
	if p.maxMsg == 0 {
		p.maxMsg = 1 << 31
	}
	var err error
	if cfg.ArenaPD != nil {
		p.pd, p.sharedPD = cfg.ArenaPD, true
	} else if p.pd, err = dev.AllocPD(); err != nil {
		return nil, fmt.Errorf("transfer: pair PD: %w", err)
	}
	p.reg = registrar(p.pd)
	n, s := cfg.Slots, cfg.SlotSize
	if p.cq, err = dev.CreateCQ(2*(n+1) + sendQueueExtra + 8); err == nil {
		if p.recvMR, err = p.pd.AllocMR(n*s, verbs.AccessLocalWrite); err == nil {
			if p.sendMR, err = p.pd.AllocMR((n+1)*s, verbs.AccessLocalWrite); err == nil {
				p.probeMR, err = p.pd.AllocMR(8, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
			}
		}
	}
	if err != nil {
		p.releaseResources()
		return nil, fmt.Errorf("transfer: pair buffers: %w", err)
	}
	stats.bufferBytes.Add(int64((2*n + 1) * s))
	p.recvWRs, p.recvSGEs = make([]verbs.RecvWR, n), make([]verbs.SGE, n)
	p.sendWRs, p.sendSGEs = make([]verbs.SendWR, n+1), make([]verbs.SGE, n+1)
	p.free = make([]int, 0, n)
	for i := 0; i < n; i++ {
		p.recvSGEs[i] = verbs.SGE{Addr: p.recvMR.Addr() + uint64(i*s), Length: uint32(s), LKey: p.recvMR.LKey()}
		p.recvWRs[i] = verbs.RecvWR{ID: kindRecv | uint64(i), SGL: p.recvSGEs[i : i+1]}
		p.free = append(p.free, i)
	}
	for i := 0; i <= n; i++ {
		p.sendSGEs[i] = verbs.SGE{Addr: p.sendMR.Addr() + uint64(i*s), LKey: p.sendMR.LKey()}
		p.sendWRs[i] = verbs.SendWR{ID: kindSend | uint64(i), Opcode: verbs.OpSend, SGL: p.sendSGEs[i : i+1]}
	}
	p.sendWRs[n].Flags = verbs.FlagInline
	p.credits = n
	return p, nil
}

// registrar returns pd as a MemRegistrar if it can register memory in
// place (a memfd-backed device has the method and refuses), else nil.
func registrar(pd verbs.PD) verbs.MemRegistrar {
	r, ok := pd.(verbs.MemRegistrar)
	if !ok {
		return nil
	}
	mr, err := r.RegMR(make([]byte, 8), verbs.AccessLocalWrite)
	if err != nil {
		return nil
	}
	_ = mr.Deregister()
	return r
}

// sendQueueExtra is the send-queue room beyond the data and control
// SENDs: READs of fetches in progress and probes.
const sendQueueExtra = 512

// options are the cm options of the pair's QP: SENDs signaled, remote
// READ allowed (of the probe region and of objects a holder registers),
// the probe region's descriptor as private data, and the receive slots
// posted before the peer learns the QP exists.
func (p *pair) options() cm.Options {
	n := p.cfg.Slots
	return cm.Options{
		PD: p.pd, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: verbs.QPCap{
			MaxSendWR: 2*(n+1) + sendQueueExtra, MaxRecvWR: n,
			MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: maxCtlLen,
		},
		SignalAll:   true,
		Access:      verbs.AccessRemoteRead,
		PrivateData: cm.EncodeDescs([]cm.MRDesc{cm.DescOf(p.probeMR), p.window()}),
		Prepare:     func(qp verbs.QP) error { return qp.PostRecv(p.recvWRs) },
	}
}

// window describes the pair's receive window (and the wire version) to
// the peer, as a second descriptor in the private data: both sides must
// have the same Slots and SlotSize.
func (p *pair) window() cm.MRDesc {
	return cm.MRDesc{Addr: uint64(p.cfg.Slots), Len: uint64(p.cfg.SlotSize), RKey: wireVersion}
}

// start adopts the connection and starts the poller and the prober.
func (p *pair) start(c *cm.Conn) error {
	descs, err := cm.DecodeDescs(c.PeerPrivateData())
	if err != nil || len(descs) != 2 || descs[0].Len < 8 {
		_ = c.Close()
		return fmt.Errorf("%w: peer's probe region and window: %v %v", object.ErrProtocol, descs, err)
	}
	if w := descs[1]; w != p.window() {
		_ = c.Close()
		return fmt.Errorf("%w: peer's window is %d slots of %d bytes (version %d), ours %d of %d (version %d)",
			object.ErrProtocol, w.Addr, w.Len, w.RKey, p.cfg.Slots, p.cfg.SlotSize, wireVersion)
	}
	p.conn, p.qp, p.peerProbe = c, c.QP(), descs[0]
	p.probeWR = []verbs.SendWR{{
		ID: kindProbe, Opcode: verbs.OpRead,
		SGL:        []verbs.SGE{{Addr: p.probeMR.Addr(), Length: 8, LKey: p.probeMR.LKey()}},
		RemoteAddr: p.peerProbe.Addr, RKey: p.peerProbe.RKey,
	}}
	p.lastRecv.Store(time.Now().UnixNano())
	p.loops.Add(2)
	go p.poll()
	go p.probe()
	return nil
}

func (p *pair) recvBuf(slot int) []byte {
	s := p.cfg.SlotSize
	return p.recvMR.Bytes()[slot*s : (slot+1)*s]
}

func (p *pair) sendBuf(i int) []byte {
	s := p.cfg.SlotSize
	return p.sendMR.Bytes()[i*s : (i+1)*s]
}

// enter registers a transfer that will use the pair; false once the pair
// failed.
func (p *pair) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return false
	}
	p.users.Add(1)
	p.busy.Add(1)
	return true
}

func (p *pair) exit() {
	p.busy.Add(-1)
	p.users.Done()
}

// failure is the pair's error, or nil while it works.
func (p *pair) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// acquire waits for a credit and a free send buffer and returns the
// buffer. It never takes the last credit: that one is kept for an ACK
// (doc.go, "Flow control"). While it waits, wake (the caller's own
// channel, of capacity 1) is how the poller tells it to look again;
// expire, when not nil, bounds the wait like ctx.
func (p *pair) acquire(ctx context.Context, expire <-chan time.Time, wake chan struct{}) (int, error) {
	p.mu.Lock()
	for p.err == nil && (p.credits < 2 || len(p.free) == 0) {
		p.waitq = append(p.waitq, wake)
		p.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-p.done:
		case <-ctx.Done():
			err = ctx.Err()
		case <-expire:
			err = errStalled
		}
		p.mu.Lock()
		if err != nil {
			if i := slices.Index(p.waitq, wake); i >= 0 {
				p.waitq = slices.Delete(p.waitq, i, i+1)
			}
			p.mu.Unlock()
			return -1, err
		}
	}
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return -1, err
	}
	p.credits--
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.mu.Unlock()
	return i, nil
}

// errStalled: the peer returned no credit for FinTimeout.
var errStalled = errors.New("transfer: peer returned no credit in time")

// post SENDs the n bytes at the start of send buffer i (from acquire),
// with the credits owed to the peer in its header.
func (p *pair) post(i, n int) error {
	b := p.sendBuf(i)
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return err
	}
	binary.LittleEndian.PutUint16(b[2:4], uint16(p.owed))
	p.owed = 0
	p.sendSGEs[i].Length = uint32(n)
	err := p.qp.PostSend(p.sendWRs[i : i+1])
	p.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: post SEND: %w", object.ErrUnavailable, err)
		p.fail(err)
		return err
	}
	return nil
}

// sendCtlLocked sends a control message inline from the control buffer;
// the caller holds p.mu and has checked there is a credit.
func (p *pair) sendCtlLocked(c ctlMsg) error {
	n := p.cfg.Slots
	b := p.sendBuf(n)
	var l int
	switch c.typ {
	case msgFin:
		l = encodeFin(b, c.tid, c.status)
	default:
		l = encodeAck(b)
	}
	binary.LittleEndian.PutUint16(b[2:4], uint16(p.owed))
	p.owed = 0
	p.credits--
	p.sendSGEs[n].Length = uint32(l)
	return p.qp.PostSend(p.sendWRs[n : n+1])
}

// flushLocked sends what the poller queued and, when the peer is owed
// ackAt credits or more, an ACK returning them.
func (p *pair) flushLocked() error {
	for len(p.outbox) > 0 && p.credits > 1 {
		c := p.outbox[0]
		p.outbox = p.outbox[:copy(p.outbox, p.outbox[1:])]
		if err := p.sendCtlLocked(c); err != nil {
			return err
		}
	}
	if p.owed >= p.ackAt && p.credits > 0 {
		return p.sendCtlLocked(ctlMsg{typ: msgAck})
	}
	return nil
}

// broadcastLocked wakes the goroutines waiting in acquire.
func (p *pair) broadcastLocked() {
	for _, w := range p.waitq {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	clear(p.waitq)
	p.waitq = p.waitq[:0]
}

// poll is the pair's poller: it completes work requests and dispatches
// received messages until the pair fails.
func (p *pair) poll() {
	defer p.loops.Done()
	wc := make([]verbs.WC, 64)
	for {
		n, err := verbs.PollWait(p.ctx, p.cq, wc, p.cfg.Poll)
		if err != nil {
			p.fail(fmt.Errorf("%w: polling: %w", object.ErrUnavailable, err))
			return
		}
		for i := 0; i < n; i++ {
			if err := p.complete(&wc[i]); err != nil {
				p.fail(err)
				return
			}
		}
		p.mu.Lock()
		err = p.flushLocked()
		p.mu.Unlock()
		if err != nil {
			p.fail(fmt.Errorf("%w: post control message: %w", object.ErrUnavailable, err))
			return
		}
	}
}

// complete handles one completion.
func (p *pair) complete(wc *verbs.WC) error {
	idx := wc.ID &^ kindMask
	switch wc.ID & kindMask {
	case kindRecv:
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("%w: receive: %v", object.ErrUnavailable, wc.Status)
		}
		slot := int(idx)
		if slot >= p.cfg.Slots || int(wc.ByteLen) > p.cfg.SlotSize {
			return fmt.Errorf("%w: receive of %d bytes in slot %d", object.ErrProtocol, wc.ByteLen, slot)
		}
		var err error
		p.rx, err = decode(p.recvBuf(slot)[:wc.ByteLen])
		m := &p.rx
		if err != nil {
			return fmt.Errorf("from %s: %w", p.peer, err)
		}
		p.lastRecv.Store(time.Now().UnixNano())
		if m.credits > 0 {
			p.mu.Lock()
			p.credits += int(m.credits)
			over := p.credits > p.cfg.Slots
			p.broadcastLocked()
			p.mu.Unlock()
			if over {
				return protoErr("peer returned %d credits, more than it was sent", m.credits)
			}
		}
		repost := true
		if m.typ != msgAck {
			if repost, err = p.onMsg(m, slot); err != nil {
				return err
			}
		}
		if repost {
			return p.repost(slot)
		}
	case kindSend:
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("%w: SEND: %v", object.ErrUnavailable, wc.Status)
		}
		if int(idx) < p.cfg.Slots {
			p.mu.Lock()
			p.free = append(p.free, int(idx))
			p.broadcastLocked()
			p.mu.Unlock()
		}
	case kindRead:
		p.onRead(uint32(idx), wc.Status)
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("%w: READ: %v", object.ErrUnavailable, wc.Status)
		}
	case kindProbe:
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("%w: peer %s does not answer: %v", object.ErrUnavailable, p.peer, wc.Status)
		}
		p.probing.Store(false)
	}
	return nil
}

// repost posts receive slot slot again, at its full size, and owes the
// peer a credit for it.
func (p *pair) repost(slot int) error {
	if err := p.qp.PostRecv(p.recvWRs[slot : slot+1]); err != nil {
		return fmt.Errorf("%w: re-post receive: %w", object.ErrUnavailable, err)
	}
	p.mu.Lock()
	p.owed++
	p.mu.Unlock()
	return nil
}

// probe READs the peer's probe region whenever transfers are in progress
// and the peer has been silent for a probe interval: a dead peer fails
// the READ (RETRY_EXC_ERR), and the pair with it.
func (p *pair) probe() {
	defer p.loops.Done()
	t := time.NewTicker(p.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		if p.busy.Load() == 0 || p.probing.Load() ||
			time.Since(time.Unix(0, p.lastRecv.Load())) < p.cfg.ProbeInterval {
			continue
		}
		p.probing.Store(true)
		if err := p.qp.PostSend(p.probeWR); err != nil {
			p.fail(fmt.Errorf("%w: post probe: %w", object.ErrUnavailable, err))
			return
		}
	}
}

// fail closes the pair once: transfers in progress end with err (it
// wraps object.ErrUnavailable or ErrProtocol), the QP is destroyed (so
// every rkey handed to the peer dies with it), and the resources are
// released once the transfers have let go of them.
func (p *pair) fail(err error) {
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	p.err = err
	p.mu.Unlock()
	close(p.done)
	p.cancel()
	if errors.Is(err, object.ErrProtocol) {
		p.log.Warn("transfer: pair closed", "err", err)
	} else {
		p.log.Debug("transfer: pair closed", "err", err)
	}
	p.stats.pairsClosed.Add(1)
	if p.conn != nil {
		_ = p.conn.Close()
	}
	if p.onFail != nil {
		p.onFail()
	}
	go func() {
		p.loops.Wait()
		p.users.Wait()
		p.releaseResources()
		close(p.freed)
	}()
}

// releaseResources frees the buffers, the CQ and the PD.
func (p *pair) releaseResources() {
	var errs []error
	for _, mr := range []verbs.MR{p.recvMR, p.sendMR, p.probeMR} {
		if mr != nil {
			errs = append(errs, mr.Deregister())
		}
	}
	if p.cq != nil {
		errs = append(errs, p.cq.Destroy())
	}
	if p.pd != nil && !p.sharedPD {
		errs = append(errs, p.pd.Dealloc())
	}
	if err := errors.Join(errs...); err != nil && !errors.Is(err, verbs.ErrClosed) {
		p.log.Warn("transfer: releasing pair", "err", err)
	}
}

// close fails the pair with ErrClosed and waits until it is released.
func (p *pair) close() {
	p.fail(fmt.Errorf("%w: pair closed", object.ErrClosed))
	<-p.freed
}
