package abdrpc

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// infoMessage is the rpc MaxMessage of a connection that carries only
// the setup calls (MethodInfo, MethodCreate, MethodClaim).
const infoMessage = replica.MaxInfo + rpc.Header

// cqDepth is a connection's CQ: two receives and a send per slot, with
// room to spare.
const cqDepth = 4 * MaxSlots

// link is one connection to a replica: the cm connection, its CQ and
// the rpc client over it.
type link struct {
	conn      *cm.Conn
	cq        verbs.CQ
	rpc       *rpc.Client
	closeOnce sync.Once
}

// close stops the rpc client (calls in flight fail), then destroys the
// QP and the CQ.
func (l *link) close() {
	l.closeOnce.Do(func() {
		l.rpc.Close()
		l.conn.Close()
		l.cq.Destroy()
	})
}

// dial connects to the replica at addr with an rpc client of messages
// up to msg bytes.
func (c *Client) dial(ctx context.Context, addr string, msg int) (*link, error) {
	cq, err := c.dev.CreateCQ(cqDepth)
	if err != nil {
		return nil, err
	}
	conn, err := cm.Dial(ctx, c.dev, addr, cm.Options{PD: c.pd, SendCQ: cq, RecvCQ: cq, Cap: replica.QPCap,
		Access: verbs.AccessAll, MinRNRTimer: replica.ClientMinRNR, RNRRetry: replica.ClientRNRRetry,
		Timeout: replica.ClientTimeout, PrivateData: memnode.Hello{Service: replica.Name, Token: c.cfg.Token}.Marshal()})
	if err != nil {
		cq.Destroy()
		return nil, err
	}
	rc, err := rpc.NewClient(c.pd, conn.QP(), cq, rpc.ClientConfig{MaxMessage: msg, Slots: c.cfg.Slots, Poll: c.cfg.Poll})
	if err != nil {
		conn.Close()
		cq.Destroy()
		return nil, err
	}
	return &link{conn: conn, cq: cq, rpc: rc}, nil
}

// call makes one call on l, its handler's error typed again, the
// answer cut to at most max bytes; a longer one is ErrProtocol.
func (l *link) call(ctx context.Context, method uint16, req []byte, max int) ([]byte, error) {
	resp := make([]byte, max+1)
	n, err := l.rpc.Call(ctx, method, req, resp)
	if err != nil {
		return nil, replica.MapErr(err)
	}
	if n > max {
		return nil, fmt.Errorf("%w: an answer longer than %d bytes to method %d", blockstore.ErrProtocol, max, method)
	}
	return resp[:n], nil
}

// connect dials a data connection to m and checks that the replica
// holds the volume; once the client has an id, it claims it there.
func (c *Client) connect(ctx context.Context, m *member) (*link, error) {
	l, err := c.dial(ctx, m.addr, c.msg)
	if err != nil {
		return nil, err
	}
	if err := c.checkLink(ctx, l); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// checkLink asks the replica for its volume, which must be the
// client's, and claims the client's id if it has one.
func (c *Client) checkLink(ctx context.Context, l *link) error {
	b, err := l.call(ctx, replica.MethodInfo, nil, replica.MaxInfo)
	if err != nil {
		return err
	}
	in, err := replica.UnmarshalInfo(b)
	if err != nil {
		return err
	}
	if !in.Layout.Equal(c.layout) {
		return fmt.Errorf("%w: the replica holds %d blocks of %d bytes on %v", blockstore.ErrNoVolume,
			in.Layout.Blocks, in.Layout.BlockSize, in.Layout.Replicas)
	}
	if c.id == 0 {
		return nil
	}
	b, err = l.call(ctx, replica.MethodClaim, binary.LittleEndian.AppendUint32(nil, c.id), 1)
	if err != nil {
		return err
	}
	return checkGrant(b)
}

// checkGrant checks MethodClaim's answer.
func checkGrant(b []byte) error {
	if len(b) != 1 || b[0] != 1 {
		return fmt.Errorf("%w: claim answered %x", blockstore.ErrProtocol, b)
	}
	return nil
}

// install makes l m's connection and watches it; it reports false (and
// closes l) when the client is closed.
func (c *Client) install(m *member, l *link) bool {
	m.link.Store(l)
	if !c.spawn(func() { c.watch(m, l) }) {
		if m.link.CompareAndSwap(l, nil) {
			l.close()
		}
		return false
	}
	c.signalUp()
	return true
}

// watch marks m down when l fails.
func (c *Client) watch(m *member, l *link) {
	select {
	case <-l.rpc.Done():
		c.markDown(m, l, l.rpc.Err())
	case <-c.stop:
	}
}

// markDown takes l, which failed, out of m and closes it; m is re-dialed
// in the background.
func (c *Client) markDown(m *member, l *link, why error) {
	if !m.link.CompareAndSwap(l, nil) {
		return
	}
	if c.ready.Load() {
		c.log.Warn("abdrpc: replica down", "replica", m.addr, "err", why)
	}
	if !c.spawn(func() { l.close(); c.redial(m) }) {
		l.close()
	}
}

// redial connects to m again, waiting longer after each failure, until
// it succeeds or the client closes. Nothing happens before Dial is done
// (Dial starts the re-dialers then) or while m is up or being re-dialed.
func (c *Client) redial(m *member) {
	if !c.ready.Load() || !m.redialing.CompareAndSwap(false, true) {
		return
	}
	defer m.redialing.Store(false)
	wait := c.cfg.Redial
	t := time.NewTimer(wait)
	defer t.Stop()
	for m.link.Load() == nil {
		select {
		case <-t.C:
		case <-c.stop:
			return
		}
		ctx, cancel := context.WithTimeout(c.stopCtx, RedialTimeout)
		l, err := c.connect(ctx, m)
		cancel()
		if err == nil {
			if c.install(m, l) {
				c.log.Info("abdrpc: replica back", "replica", m.addr)
			}
			return
		}
		c.log.Debug("abdrpc: re-dial failed", "replica", m.addr, "err", err)
		wait = min(2*wait, c.cfg.MaxRedial)
		t.Reset(wait)
	}
}
