package perf

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config describes a measured pair of devices.
type Config struct {
	// Client and Server are the device URIs of the initiator and the
	// responder, e.g. loop://perf/client and loop://perf/server. Dial
	// opens only Client and sets Server to the remote device's address.
	Client, Server string
	// Poll is how both sides wait for completions.
	Poll verbs.PollPolicy
	// Window is the number of operations the bandwidth test keeps
	// outstanding (perftest's tx-depth); default 128, rounded down to a
	// multiple of Batch.
	Window int
	// Batch is the number of operations per post list in the bandwidth
	// test; only the last one is signaled (perftest's cq-mod). Default
	// Window/8, at least 1, at most Window.
	Batch int
	// MaxSize is the largest message the pair can measure; default MaxSize
	// (1 MiB). Dial lowers it to the length of the remote region.
	MaxSize int
	// Samples is the capacity of the latency sample buffer; default 1<<20.
	// Longer runs keep exact min, max and mean and compute percentiles
	// over the most recent Samples operations.
	Samples int
	// SingleThreaded creates the client's QP and CQ SingleThreaded
	// (verbs.QPInitAttr, verbs.CQInitAttr), as ibverbs' thread domain and
	// single-threaded CQ: the measuring loop is the only poster and
	// poller. The client's receives are then posted only when a SEND is
	// first measured, so that until then the CQ is the QP's alone and
	// post and poll take no lock; from then on the CQ locks as usual.
	SingleThreaded bool
}

func (c *Config) defaults() {
	if c.Window <= 0 {
		c.Window = 128
	}
	if c.Batch <= 0 {
		c.Batch = max(c.Window/8, 1)
	}
	c.Batch = min(c.Batch, c.Window)
	c.Window = c.Window / c.Batch * c.Batch
	if c.MaxSize <= 0 {
		c.MaxSize = MaxSize
	}
	if c.Samples <= 0 {
		c.Samples = 1 << 20
	}
}

// Receive-queue depths.
const (
	serverRecvs = 512 // receives the in-process server keeps posted
	clientRecvs = 32  // receives the client keeps posted for pongs (plus Window when remote)
	serverSends = 64  // in-process server send-queue depth (pongs)
)

// EchoTimeout is how long a Dial pair waits for the echo of its first
// SEND before it concludes that the server does not echo.
var EchoTimeout = 2 * time.Second

// Remote-mode RNR settings of the client's QP: a SEND that finds no
// receive at the server is retried forever, 100 µs apart, so a window
// larger than the server's posted receives only slows the test down.
const remoteMinRNR = 100 * time.Microsecond

// echo states of a remote server.
const (
	echoUnknown = iota // not probed yet
	echoYes            // every SEND comes back
	echoNo             // SENDs are consumed silently
)

// Pair is a connected RC queue pair between a client and a server, with
// registered buffers, ready to measure. The measured loops use only the
// client's side: its QP, CQ and buffer, and the descriptor of the remote
// region. The server is either in this process (Open) or another one
// (Dial).
type Pair struct {
	cfg  Config
	cdev verbs.Device
	ccq  verbs.CQ
	cqp  verbs.QP
	cmr  verbs.MR

	remote cm.MRDesc // the region the operations target
	srv    *server   // the in-process server; nil for a Dial pair
	conn   *cm.Conn  // the connection of a Dial pair
	echo   int       // Dial pair: whether the server echoes SENDs

	wc     []verbs.WC     // client poll buffer
	wrs    []verbs.SendWR // client post list, Window long
	sges   []verbs.SGE    // the client post list's SGEs, one per request
	crecv  []verbs.RecvWR // one client receive (pong buffer)
	nrecv  int            // receives the client keeps posted
	recvUp bool           // the nrecv receives are posted

	lat *stats.Latencies

	sent  uint64 // SENDs posted by the client, ever
	recvd uint64 // messages received by the client, ever
}

// server is the server side of an in-process pair.
type server struct {
	dev  verbs.Device
	cq   verbs.CQ
	qp   verbs.QP
	mr   verbs.MR
	wc   []verbs.WC
	recv []verbs.RecvWR // re-posted in batches
	pong []verbs.SendWR // the reply
	poll verbs.PollPolicy

	credits atomic.Uint64 // receives posted by the server, ever
}

// Open opens both devices in this process and connects an RC pair
// between them. The caller must Close the pair.
func Open(cfg Config) (_ *Pair, err error) {
	cfg.defaults()
	p := &Pair{cfg: cfg, nrecv: clientRecvs, echo: echoYes}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.cdev, err = verbs.Open(cfg.Client); err != nil {
		return nil, err
	}
	s := &server{poll: cfg.Poll}
	p.srv = s
	if s.dev, err = verbs.Open(cfg.Server); err != nil {
		return nil, err
	}
	cpd, err := p.cdev.AllocPD()
	if err != nil {
		return nil, err
	}
	spd, err := s.dev.AllocPD()
	if err != nil {
		return nil, err
	}
	if err = p.createClient(cpd); err != nil {
		return nil, err
	}
	if s.cq, err = s.dev.CreateCQ(serverRecvs + serverSends + 64); err != nil {
		return nil, err
	}
	s.qp, err = spd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: serverSends, MaxRecvWR: serverRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	if err = verbs.ConnectRC(p.cqp, verbs.AccessAll, s.dev.Address(), s.qp.QPN()); err != nil {
		return nil, err
	}
	if err = verbs.ConnectRC(s.qp, verbs.AccessAll, p.cdev.Address(), p.cqp.QPN()); err != nil {
		return nil, err
	}
	// The server's region: [0, MaxSize) is the target, [MaxSize,
	// 2·MaxSize) receives SENDs.
	if s.mr, err = spd.AllocMR(2*cfg.MaxSize, verbs.AccessAll); err != nil {
		return nil, err
	}
	fill(s.mr.Bytes()[:cfg.MaxSize])
	p.remote = cm.DescOf(s.mr)
	if err = p.alloc(cpd); err != nil {
		return nil, err
	}
	s.alloc(cfg.MaxSize)
	if err = s.qp.PostRecv(s.recv); err != nil {
		return nil, err
	}
	s.credits.Add(serverRecvs)
	return p, nil
}

// Dial opens the client device cfg.Client, connects with cm to the server
// listening at addr (a host:port side channel, e.g. an rdmakit node),
// sending private, and targets the first memory region the server
// described in its private data (cm.EncodeDescs). cfg.Server is set to the
// server's device address and MaxSize is lowered to the region's length.
//
// SEND needs the server to keep receives posted; the latency test also
// needs it to echo every message (rdmakit node --echo), which the pair
// probes with its first SEND, waiting EchoTimeout. The client's QP retries
// a SEND that finds no receive forever (RNR), 100 µs apart.
func Dial(ctx context.Context, cfg Config, addr string, private []byte) (_ *Pair, err error) {
	cfg.defaults()
	p := &Pair{cfg: cfg, nrecv: cfg.Window + clientRecvs}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.cdev, err = verbs.Open(cfg.Client); err != nil {
		return nil, err
	}
	pd, err := p.cdev.AllocPD()
	if err != nil {
		return nil, err
	}
	if err = p.createCQ(); err != nil {
		return nil, err
	}
	p.conn, err = cm.Dial(ctx, p.cdev, addr, cm.Options{
		PD: pd, SendCQ: p.ccq, RecvCQ: p.ccq, SingleThreaded: p.cfg.SingleThreaded,
		Cap:         verbs.QPCap{MaxSendWR: p.cfg.Window + p.nrecv, MaxRecvWR: p.nrecv, MaxSendSGE: 1, MaxRecvSGE: 1},
		PrivateData: private,
		MinRNRTimer: remoteMinRNR,
		RNRRetry:    verbs.InfiniteRNRRetry,
	})
	if err != nil {
		return nil, err
	}
	p.cqp = p.conn.QP()
	descs, err := cm.DecodeDescs(p.conn.PeerPrivateData())
	if err != nil {
		return nil, fmt.Errorf("perf: the server at %s sent no memory-region descriptors: %w", addr, err)
	}
	if len(descs) == 0 || descs[0].Len < 8 {
		return nil, fmt.Errorf("perf: the server at %s offers no memory region of 8 bytes or more", addr)
	}
	p.remote = descs[0]
	p.cfg.Server = p.conn.PeerAddress()
	p.cfg.MaxSize = int(min(uint64(p.cfg.MaxSize), p.remote.Len))
	if err = p.alloc(pd); err != nil {
		return nil, err
	}
	return p, nil
}

// createClient creates the client's CQ and QP of an in-process pair.
func (p *Pair) createClient(pd verbs.PD) (err error) {
	if err = p.createCQ(); err != nil {
		return err
	}
	p.cqp, err = pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: p.ccq, RecvCQ: p.ccq,
		Cap:            verbs.QPCap{MaxSendWR: p.cfg.Window + p.nrecv, MaxRecvWR: p.nrecv, MaxSendSGE: 1, MaxRecvSGE: 1},
		SingleThreaded: p.cfg.SingleThreaded})
	return err
}

// createCQ creates the client's CQ.
func (p *Pair) createCQ() (err error) {
	p.ccq, err = verbs.CreateCQEx(p.cdev, verbs.CQInitAttr{Depth: p.cfg.Window + 2*p.nrecv + 64,
		SingleThreaded: p.cfg.SingleThreaded})
	return err
}

// postRecvs posts the client's receives, once.
func (p *Pair) postRecvs() error {
	if p.recvUp {
		return nil
	}
	for range p.nrecv {
		if err := p.cqp.PostRecv(p.crecv); err != nil {
			return err
		}
	}
	p.recvUp = true
	return nil
}

// alloc registers the client's region — [0, MaxSize) is the payload,
// [MaxSize, 2·MaxSize) receives — allocates every buffer the measured
// loops use and posts the client's receives.
func (p *Pair) alloc(pd verbs.PD) (err error) {
	if p.cmr, err = pd.AllocMR(2*p.cfg.MaxSize, verbs.AccessAll); err != nil {
		return err
	}
	fill(p.cmr.Bytes()[:p.cfg.MaxSize])
	w := p.cfg.Window
	p.wc = make([]verbs.WC, w+2*p.nrecv)
	p.wrs = make([]verbs.SendWR, w)
	p.sges = make([]verbs.SGE, w)
	for i := range p.wrs {
		p.wrs[i].SGL = p.sges[i : i+1 : i+1]
	}
	p.crecv = []verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: p.cmr.Addr() + uint64(p.cfg.MaxSize),
		Length: uint32(p.cfg.MaxSize), LKey: p.cmr.LKey()}}}}
	p.lat = stats.NewLatencies(p.cfg.Samples)
	if p.cfg.SingleThreaded {
		return nil // posted before the first SEND
	}
	return p.postRecvs()
}

// fill writes a non-zero pattern over a payload buffer. A fresh region's
// pages are holes that reads map to the kernel's single zero page, which
// stays in the CPU's cache: copying from it reads nothing from memory, and
// bandwidth tests of WRITE (from the client's payload) and READ (from the
// server's) would measure half a copy. Writing every page first makes the
// copies real.
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i%251) + 1
	}
}

// alloc allocates the in-process server's buffers; its receives land in
// [maxSize, 2·maxSize) of its region.
func (s *server) alloc(maxSize int) {
	s.wc = make([]verbs.WC, serverRecvs+serverSends)
	s.recv = make([]verbs.RecvWR, serverRecvs)
	sgl := []verbs.SGE{{Addr: s.mr.Addr() + uint64(maxSize), Length: uint32(maxSize), LKey: s.mr.LKey()}}
	for i := range s.recv {
		s.recv[i] = verbs.RecvWR{ID: uint64(i), SGL: sgl}
	}
	s.pong = []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: s.mr.Addr(), LKey: s.mr.LKey()}}}}
}

// Config returns the pair's configuration with defaults filled in.
func (p *Pair) Config() Config { return p.cfg }

// Transport is the client device's transport name, e.g. "loop".
func (p *Pair) Transport() string { return p.cdev.Attr().Transport }

// ClientAddress is the client device's address (Device.Address).
func (p *Pair) ClientAddress() string { return p.cdev.Address() }

// Remote is the descriptor of the region the operations target.
func (p *Pair) Remote() cm.MRDesc { return p.remote }

// Close closes the connection and the devices this pair opened, and
// everything created on them.
func (p *Pair) Close() error {
	var errs []error
	if p.conn != nil {
		errs = append(errs, p.conn.Close())
	}
	if p.cdev != nil {
		errs = append(errs, p.cdev.Close())
	}
	if p.srv != nil && p.srv.dev != nil {
		errs = append(errs, p.srv.dev.Close())
	}
	return errors.Join(errs...)
}

// prepare fills the first n requests of the client post list for op and
// size; the last of each batch of b is signaled.
func (p *Pair) prepare(op Op, size, n, b int) {
	for i := range n {
		wr := &p.wrs[i]
		*wr = verbs.SendWR{ID: uint64(i), Opcode: op.Opcode(), SGL: wr.SGL,
			RemoteAddr: p.remote.Addr, RKey: p.remote.RKey}
		if (i+1)%b == 0 {
			wr.Flags = verbs.FlagSignaled
		}
		wr.SGL[0] = verbs.SGE{Addr: p.cmr.Addr(), Length: uint32(size), LKey: p.cmr.LKey()}
		if op == FAA {
			wr.Atomic.Swap[0] = 1
		}
	}
}

// check validates a cell before it runs.
func (p *Pair) check(op Op, size int) error {
	if op.Opcode() == 0 {
		return fmt.Errorf("perf: unknown operation %v", op)
	}
	if op.Atomic() && size != 8 {
		return fmt.Errorf("perf: %v is 8 bytes, not %d", op, size)
	}
	if size <= 0 || size > p.cfg.MaxSize {
		return fmt.Errorf("perf: message size %d outside 1..%d", size, p.cfg.MaxSize)
	}
	return nil
}

// completionError is the error of a failed completion.
func completionError(op Op, size int, wc *verbs.WC) error {
	return fmt.Errorf("perf: %v of %d bytes: %w", op, size, wc.Err())
}
