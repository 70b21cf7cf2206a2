package memnode

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// probeID is the wr_id of the liveness probe. Services never see it
// (probeCQ takes its completions out).
const probeID = ^uint64(0)

// ErrDeparted is the cause a client's session ends with when the server
// found the client gone: its liveness probe failed or its QP went to
// ERROR.
var ErrDeparted = errors.New("memnode: the client is gone")

// client is one established client: its connection, its session and
// what tells the server it departed.
type client struct {
	conn    *cm.Conn
	sess    Session
	cancel  context.CancelCauseFunc
	probeWR []verbs.SendWR // a signaled 0-byte READ
	probing atomic.Bool    // a probe is outstanding
}

// probe checks the client: a QP in ERROR means it is gone; otherwise it
// posts a 0-byte RDMA READ unless one is outstanding. The READ needs no
// rkey and touches no memory; it fails (RETRY_EXC_ERR, or flushed) when
// the client's QP or process is gone, and probeCQ then ends the session.
// The server calls probe holding its lock, so the QP is not destroyed
// under it.
func (c *client) probe() {
	qp := c.conn.QP()
	if qp.State() == verbs.StateError {
		c.cancel(fmt.Errorf("%w: its QP is in ERROR", ErrDeparted))
		return
	}
	if !c.probing.CompareAndSwap(false, true) {
		return
	}
	if err := qp.PostSend(c.probeWR); err != nil {
		c.probing.Store(false) // e.g. the send queue is full: next time
	}
}

// probeCQ is a session's CQ as its Serve sees it: the probe's
// completions are taken out of every Poll, a failed one ending the
// session.
type probeCQ struct {
	verbs.CQ
	c *client
}

// Poll polls the CQ and removes the probe's completions from wc,
// allocating nothing.
func (p *probeCQ) Poll(wc []verbs.WC) (int, error) {
	n, err := p.CQ.Poll(wc)
	k := 0
	for i := range n {
		w := &wc[i]
		if w.ID == probeID && w.Opcode != verbs.WCRecv && w.Opcode != verbs.WCRecvRDMAWithImm {
			if w.Status != verbs.StatusSuccess {
				p.c.cancel(fmt.Errorf("%w: liveness probe: %w", ErrDeparted, w.Err()))
			}
			p.c.probing.Store(false)
			continue
		}
		if k != i {
			wc[k] = *w
		}
		k++
	}
	return k, err
}
