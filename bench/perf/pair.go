package perf

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config describes a measured pair of devices.
type Config struct {
	// Client and Server are the device URIs of the initiator and the
	// responder, e.g. loop://perf/client and loop://perf/server.
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
	// (1 MiB).
	MaxSize int
	// Samples is the capacity of the latency sample buffer; default 1<<20.
	// Longer runs keep exact min, max and mean and compute percentiles
	// over the most recent Samples operations.
	Samples int
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
	serverRecvs = 512 // receives the server keeps posted
	clientRecvs = 32  // receives the client keeps posted for pongs
	serverSends = 64  // server send-queue depth (pongs)
)

// Pair is a connected RC queue pair between a client and a server device,
// with registered buffers, ready to measure.
type Pair struct {
	cfg        Config
	cdev, sdev verbs.Device
	ccq, scq   verbs.CQ
	cqp, sqp   verbs.QP
	cmr, smr   verbs.MR

	wc  []verbs.WC // client poll buffer
	swc []verbs.WC // server poll buffer

	wrs   []verbs.SendWR // client post list, Window long
	sges  []verbs.SGE    // the client post list's SGEs, one per request
	crecv []verbs.RecvWR // one client receive (pong buffer)
	srecv []verbs.RecvWR // server receives, re-posted in batches
	pong  []verbs.SendWR // the server's reply

	lat *stats.Latencies

	sent    uint64        // SENDs posted by the client, ever
	credits atomic.Uint64 // receives posted by the server, ever
}

// Open opens both devices and connects an RC pair between them. The
// caller must Close the pair.
func Open(cfg Config) (_ *Pair, err error) {
	cfg.defaults()
	p := &Pair{cfg: cfg}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.cdev, err = verbs.Open(cfg.Client); err != nil {
		return nil, err
	}
	if p.sdev, err = verbs.Open(cfg.Server); err != nil {
		return nil, err
	}
	cpd, err := p.cdev.AllocPD()
	if err != nil {
		return nil, err
	}
	spd, err := p.sdev.AllocPD()
	if err != nil {
		return nil, err
	}
	if p.ccq, err = p.cdev.CreateCQ(cfg.Window + 2*clientRecvs + 64); err != nil {
		return nil, err
	}
	if p.scq, err = p.sdev.CreateCQ(serverRecvs + serverSends + 64); err != nil {
		return nil, err
	}
	p.cqp, err = cpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: p.ccq, RecvCQ: p.ccq,
		Cap: verbs.QPCap{MaxSendWR: cfg.Window + clientRecvs, MaxRecvWR: clientRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	p.sqp, err = spd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: p.scq, RecvCQ: p.scq,
		Cap: verbs.QPCap{MaxSendWR: serverSends, MaxRecvWR: serverRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	if err = verbs.ConnectRC(p.cqp, verbs.AccessAll, p.sdev.Address(), p.sqp.QPN()); err != nil {
		return nil, err
	}
	if err = verbs.ConnectRC(p.sqp, verbs.AccessAll, p.cdev.Address(), p.cqp.QPN()); err != nil {
		return nil, err
	}
	// Each region: [0, MaxSize) is the payload or target, [MaxSize,
	// 2·MaxSize) receives SENDs.
	if p.cmr, err = cpd.AllocMR(2*cfg.MaxSize, verbs.AccessAll); err != nil {
		return nil, err
	}
	if p.smr, err = spd.AllocMR(2*cfg.MaxSize, verbs.AccessAll); err != nil {
		return nil, err
	}
	p.alloc()
	if err = p.postReceives(); err != nil {
		return nil, err
	}
	return p, nil
}

// alloc allocates every buffer the measured loops use.
func (p *Pair) alloc() {
	w := p.cfg.Window
	p.wc = make([]verbs.WC, w+2*clientRecvs)
	p.swc = make([]verbs.WC, serverRecvs+serverSends)
	p.wrs = make([]verbs.SendWR, w)
	p.sges = make([]verbs.SGE, w)
	for i := range p.wrs {
		p.wrs[i].SGL = p.sges[i : i+1 : i+1]
	}
	recvAt := func(mr verbs.MR) []verbs.SGE {
		return []verbs.SGE{{Addr: mr.Addr() + uint64(p.cfg.MaxSize), Length: uint32(p.cfg.MaxSize), LKey: mr.LKey()}}
	}
	p.crecv = []verbs.RecvWR{{ID: 1, SGL: recvAt(p.cmr)}}
	p.srecv = make([]verbs.RecvWR, serverRecvs)
	ssgl := recvAt(p.smr)
	for i := range p.srecv {
		p.srecv[i] = verbs.RecvWR{ID: uint64(i), SGL: ssgl}
	}
	p.pong = []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: p.smr.Addr(), LKey: p.smr.LKey()}}}}
	p.lat = stats.NewLatencies(p.cfg.Samples)
}

// postReceives fills both receive queues.
func (p *Pair) postReceives() error {
	for range clientRecvs {
		if err := p.cqp.PostRecv(p.crecv); err != nil {
			return err
		}
	}
	if err := p.sqp.PostRecv(p.srecv); err != nil {
		return err
	}
	p.credits.Add(serverRecvs)
	return nil
}

// Config returns the pair's configuration with defaults filled in.
func (p *Pair) Config() Config { return p.cfg }

// Transport is the client device's transport name, e.g. "loop".
func (p *Pair) Transport() string { return p.cdev.Attr().Transport }

// Close closes both devices and everything created on them.
func (p *Pair) Close() error {
	var errs []error
	for _, d := range []verbs.Device{p.cdev, p.sdev} {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}

// prepare fills the first n requests of the client post list for op and
// size; the last of each batch of b is signaled.
func (p *Pair) prepare(op Op, size, n, b int) {
	for i := range n {
		wr := &p.wrs[i]
		*wr = verbs.SendWR{ID: uint64(i), Opcode: op.Opcode(), SGL: wr.SGL,
			RemoteAddr: p.smr.Addr(), RKey: p.smr.RKey()}
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
