package farm

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// peer is a node's connection to another node, for recovery's calls.
type peer struct {
	conn *cm.Conn
	cq   verbs.CQ
	rpc  *rpc.Client
}

// peer returns the connection to node i, dialing it when there is none.
func (n *Node) peer(ctx context.Context, i int) (*peer, error) {
	n.mu.Lock()
	p := n.peers[i]
	addr := n.layout.Nodes[i]
	n.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := dialPeer(ctx, n.dev, n.pd, addr, n.cfg.Token, n.cfg.MaxMessage)
	if err != nil {
		return nil, fmt.Errorf("node %d (%s): %w", i, addr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		p.close()
		return nil, fmt.Errorf("farm: node closed")
	}
	if q := n.peers[i]; q != nil {
		p.close()
		return q, nil
	}
	n.peers[i] = p
	return p, nil
}

// dropPeer closes node i's connection p after a failed call.
func (n *Node) dropPeer(i int, p *peer) {
	n.mu.Lock()
	if n.peers[i] == p {
		n.peers[i] = nil
	}
	n.mu.Unlock()
	p.close()
}

// dialPeer connects to a node's cm address addr with an RPC client.
func dialPeer(ctx context.Context, dev verbs.Device, pd verbs.PD, addr, token string, maxMessage int) (*peer, error) {
	cq, err := dev.CreateCQ(clientCQ)
	if err != nil {
		return nil, err
	}
	conn, err := cm.Dial(ctx, dev, addr, dialOptions(pd, cq, token))
	if err != nil {
		cq.Destroy()
		return nil, err
	}
	rc, err := rpc.NewClient(pd, conn.QP(), cq, rpc.ClientConfig{MaxMessage: maxMessage, Slots: rpcSlots, Poll: verbs.PollEvent})
	if err != nil {
		conn.Close()
		cq.Destroy()
		return nil, err
	}
	return &peer{conn: conn, cq: cq, rpc: rc}, nil
}

func (p *peer) close() {
	p.rpc.Close()
	p.conn.Close()
	p.cq.Destroy()
}
