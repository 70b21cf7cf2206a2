package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// nodeConn is one client connection of a node: an RC QP whose receives
// come from its own SRQ, its CQ and its receive buffers.
type nodeConn struct {
	n    *node
	srq  verbs.SRQ
	cq   verbs.CQ
	buf  verbs.MR // receive buffers: one per receive with --echo, else one shared sink
	conn *cm.Conn

	wc     []verbs.WC
	recvs  []verbs.RecvWR // receive i lands in slot i (echo) or the sink
	batch  []verbs.RecvWR // receives to re-post, reused
	echoes []verbs.SendWR // echo SENDs to post, reused
	sgl    []verbs.SGE    // one SGE per echo slot

	probeWR []verbs.SendWR // the liveness probe: a signaled 0-byte READ
	probing atomic.Bool    // a probe is outstanding
}

// probeID is the wr_id of the liveness probe.
const probeID = ^uint64(0)

// probe posts a 0-byte RDMA READ to the client's QP unless one is still
// outstanding. A 0-byte READ needs no rkey and touches no memory; it
// fails with RETRY_EXC_ERR when the client's QP or process is gone, which
// ends the connection and frees its resources.
func (c *nodeConn) probe() {
	if c.conn == nil || !c.probing.CompareAndSwap(false, true) {
		return
	}
	if err := c.conn.QP().PostSend(c.probeWR); err != nil {
		c.probing.Store(false)
	}
}

// serveConn accepts req and serves the connection until ctx ends or the
// QP fails. The receives are posted (on an SRQ) before the client's QP is
// connected, so its first SEND finds one.
func (n *node) serveConn(ctx context.Context, req *cm.Request) {
	log := n.log.With("peer", req.PeerAddress(), "peer_qpn", req.PeerQPN())
	c := &nodeConn{n: n}
	defer c.release()
	handshaking := true
	defer func() {
		if handshaking {
			n.handshakes.Done()
		}
	}()
	if err := c.setup(); err != nil {
		n.rejected.Add(1)
		log.Error("connection setup", "err", err)
		req.Reject("node: " + err.Error())
		return
	}
	cfg := n.cfg
	// A shutdown does not cut a handshake short: the client may already
	// hold its end (the listener's timeout bounds the handshake), and the
	// connection then counts, and ends as soon as it is served.
	conn, err := req.Accept(context.WithoutCancel(ctx), cm.Options{
		PD: n.pd, SendCQ: c.cq, RecvCQ: c.cq, SRQ: c.srq,
		Cap:         verbs.QPCap{MaxSendWR: cfg.recv + 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		Access:      cfg.mrAccess,
		PrivateData: n.private,
	})
	handshaking = false
	n.handshakes.Done()
	if err != nil {
		n.rejected.Add(1)
		log.Warn("connection failed", "err", err)
		return
	}
	c.conn = conn
	n.accepted.Add(1)
	log.Info("connection established", "qpn", conn.QP().QPN())
	n.track(c, true)
	defer n.track(c, false)
	if err := c.loop(ctx); err != nil {
		if errors.Is(err, verbs.StatusRetryExcErr.Err()) {
			log.Info("connection ends: the peer is gone", "err", err)
		} else {
			log.Warn("connection ends", "err", err)
		}
		return
	}
	log.Debug("connection closed by shutdown")
}

// setup creates the SRQ, the CQ and the receive buffers, and posts the
// receives.
func (c *nodeConn) setup() (err error) {
	cfg := c.n.cfg
	slots := 1
	if cfg.echo {
		slots = cfg.recv
	}
	if c.srq, err = c.n.pd.CreateSRQ(cfg.recv, 1); err != nil {
		return fmt.Errorf("create SRQ: %w", err)
	}
	// Every receive and every echo can complete at once.
	if c.cq, err = c.n.dev.CreateCQ(2*cfg.recv + 16); err != nil {
		return fmt.Errorf("create CQ: %w", err)
	}
	if c.buf, err = c.n.pd.AllocMR(slots*cfg.recvSize, verbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("receive buffers: %w", err)
	}
	c.wc = make([]verbs.WC, 2*cfg.recv+16)
	c.recvs = make([]verbs.RecvWR, cfg.recv)
	c.sgl = make([]verbs.SGE, slots)
	for i := range c.sgl {
		c.sgl[i] = verbs.SGE{Addr: c.buf.Addr() + uint64(i*cfg.recvSize), Length: uint32(cfg.recvSize), LKey: c.buf.LKey()}
	}
	for i := range c.recvs {
		c.recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: c.sgl[i%slots : i%slots+1 : i%slots+1]}
	}
	c.batch = make([]verbs.RecvWR, 0, cfg.recv)
	c.probeWR = []verbs.SendWR{{ID: probeID, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled}}
	if cfg.echo {
		c.echoes = make([]verbs.SendWR, 0, cfg.recv)
		// The echo's SGE is its own copy: its length is the message's.
		c.sgl = append([]verbs.SGE(nil), c.sgl...)
	}
	return c.srq.PostRecv(c.recvs)
}

// loop re-posts consumed receives and, with --echo, sends every message
// back, re-posting its receive when the echo completed (the buffer is the
// echo's payload until then). It polls adaptively (a short spin keeps an
// echo ping-pong from paying an idle CPU's wake-up, then it parks on the
// completion event) and allocates nothing.
func (c *nodeConn) loop(ctx context.Context) error {
	echo := c.n.cfg.echo
	qp := c.conn.QP()
	for {
		k, err := verbs.PollWait(ctx, c.cq, c.wc, verbs.PollAdaptive)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
		c.batch, c.echoes = c.batch[:0], c.echoes[:0]
		for i := range k {
			wc := &c.wc[i]
			if wc.Status != verbs.StatusSuccess {
				return c.failure(wc)
			}
			switch {
			case wc.ID == probeID && wc.Opcode != verbs.WCRecv && wc.Opcode != verbs.WCRecvRDMAWithImm:
				c.probing.Store(false)
			case wc.Opcode == verbs.WCRecv && echo:
				id := wc.ID
				sge := &c.sgl[id]
				sge.Length = wc.ByteLen
				wr := verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled}
				if wc.ByteLen > 0 {
					wr.SGL = c.sgl[id : id+1 : id+1]
				}
				c.echoes = append(c.echoes, wr)
			case wc.Opcode == verbs.WCRecv, wc.Opcode == verbs.WCRecvRDMAWithImm, wc.Opcode == verbs.WCSend:
				// A message to drop, a WRITE_WITH_IMM's notification, or a
				// completed echo: the receive is free again.
				c.batch = append(c.batch, c.recvs[wc.ID])
			}
		}
		if len(c.batch) > 0 {
			if err := c.srq.PostRecv(c.batch); err != nil {
				return fmt.Errorf("re-post receives: %w", err)
			}
		}
		if len(c.echoes) > 0 {
			if err := qp.PostSend(c.echoes); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
		}
	}
}

// failure describes a failed completion.
func (c *nodeConn) failure(wc *verbs.WC) error {
	switch {
	case wc.ID == probeID:
		return fmt.Errorf("liveness probe: %w", wc.Err())
	case wc.Status == verbs.StatusLocLenErr:
		return fmt.Errorf("a message larger than --recv-size (%d B): %w", c.n.cfg.recvSize, wc.Err())
	case c.n.cfg.echo:
		return fmt.Errorf("receive or echo %d: %w", wc.ID, wc.Err())
	}
	return fmt.Errorf("receive %d: %w", wc.ID, wc.Err())
}

// release destroys what the connection created, QP first.
func (c *nodeConn) release() {
	if c.conn != nil {
		c.conn.Close()
	}
	if c.srq != nil {
		c.srq.Destroy()
	}
	if c.cq != nil {
		c.cq.Destroy()
	}
	if c.buf != nil {
		c.buf.Deregister()
	}
}
