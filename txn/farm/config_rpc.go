package farm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/txn"
)

// ErrNoMembership: the node runs no membership (NodeConfig.Members is
// empty, or it has no layout yet), so it holds no Configuration.
var ErrNoMembership = errors.New("farm: node runs no membership")

// Configuration returns the configuration the node's member of the
// membership has applied; ok is false when it runs none.
func (n *Node) Configuration() (c Configuration, ok bool) {
	n.mu.Lock()
	m := n.members
	n.mu.Unlock()
	if m == nil {
		return c, false
	}
	return m.Configuration(), true
}

// configCall is MethodConfig: the node's configuration.
func (n *Node) configCall(_, resp []byte) (int, error) {
	c, ok := n.Configuration()
	if !ok {
		return 0, ErrNoMembership
	}
	b := c.Marshal()
	if len(b) > len(resp) {
		return 0, fmt.Errorf("%w: a %d-byte configuration", ErrProtocol, len(b))
	}
	return copy(resp, b), nil
}

// Configuration asks the nodes, in turn (each for at most 2 s), for the
// database's configuration and returns the first answer (the newest a
// node has applied); the client routes by it from then on. A node without membership answers ErrNoMembership, one that
// cannot be reached ErrUnreachable: the last such error is returned when
// no node answers.
func (db *DB) Configuration(ctx context.Context) (Configuration, error) {
	last := fmt.Errorf("%w: no node", txn.ErrUnreachable)
	for i := range db.conns {
		c, err := db.conn(i)
		if err != nil {
			last = err
			continue
		}
		one, cancel := context.WithTimeout(ctx, peerTimeout)
		conf, err := c.config(one)
		cancel()
		if err == nil {
			db.learn(conf)
			return conf, nil
		}
		if ctx.Err() != nil {
			return Configuration{}, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			db.lost(c) // a node that does not answer for so long: connect again
		}
		last = err
	}
	return Configuration{}, last
}

// config calls MethodConfig.
func (c *conn) config(ctx context.Context) (Configuration, error) {
	resp := make([]byte, c.db.cfg.MaxMessage)
	m, err := c.rpc.Call(ctx, MethodConfig, nil, resp)
	var re *rpc.RemoteError
	switch {
	case errors.As(err, &re) && re.Msg == ErrNoMembership.Error():
		return Configuration{}, fmt.Errorf("%w: node %d", ErrNoMembership, c.idx)
	case err != nil:
		select {
		case <-c.rpc.Done():
			c.db.lost(c)
		default:
		}
		return Configuration{}, c.mapErr("config", err)
	}
	return unmarshalConfiguration(resp[:m])
}

// Membership is the node's member of the membership (nil without
// NodeConfig.Members, or before the node has a layout).
func (n *Node) Membership() *Membership {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members
}

// refreshEvery bounds how often a client asks for the configuration
// when it cannot reach a node.
const refreshEvery = 20 * time.Millisecond

// refresh asks the nodes for the configuration in the background (one
// request at a time, at most every refreshEvery) and learns it: a
// client that cannot reach a node learns that it is out without
// waiting for each of its connections to fail.
func (db *DB) refresh() {
	if db.static.Load() || db.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	last := db.refreshed.Load()
	if now-last < int64(refreshEvery) || !db.refreshed.CompareAndSwap(last, now) {
		return
	}
	db.rmu.Lock() // Close waits for wg after it set closed under rmu
	defer db.rmu.Unlock()
	if db.closed.Load() {
		return
	}
	db.wg.Go(func() {
		for i := range db.conns {
			c := db.conns[i].Load()
			if c == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
			conf, err := c.config(ctx)
			cancel()
			if err == nil {
				db.learn(conf)
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				db.lost(c)
			}
		}
	})
}
