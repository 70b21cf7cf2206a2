package ford

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn/internal/membership"
)

// NodeConfig configures a FORD memory node that takes part in the
// database's membership: a memnode server of one region (what clients
// READ, WRITE and CAS, the CPU doing nothing per transaction) and its
// member of the raft group that holds the Configuration (package
// txn/internal/membership, shared with txn/farm). Clients with
// Config.Members query the members for it.
type NodeConfig struct {
	// Server is the memory node: its Memory is set to the layout's
	// NodeBytes when 0; Token is its clients' token and the membership's.
	Server memnode.Config
	// Layout is the database's (its F places the copies at epoch 1).
	Layout Layout
	// Self is this node's index in the database's node order.
	Self int
	// Members are every node's membership address (host:port, TCP), in
	// the node order; Members[Self] is where this node's member listens
	// (or MemberListener, when not nil: the node closes it).
	Members        []string
	MemberListener net.Listener
	// Tick is the membership's raft tick (default 10 ms); Silence how
	// long its leader waits for a silent node before it takes it out
	// (default membership.DefaultSilence).
	Tick, Silence time.Duration
	// ConfigLease is how long a client may use a configuration after it
	// asked for it (default DefaultConfigLease); Lease the longest lock
	// lease a client may take (default and at most MaxLease); Skew the
	// bound on clients' clock differences (default 5 ms). Together they
	// set how long a new epoch waits before clients use it (doc.go,
	// Failover): every node of a database must use the same.
	ConfigLease, Lease, Skew time.Duration
	// Logger receives the membership's logs (default slog.Default()).
	Logger *slog.Logger
}

// DefaultConfigLease is NodeConfig.ConfigLease's default.
const DefaultConfigLease = 500 * time.Millisecond

// Node is a running FORD memory node with its member of the membership.
type Node struct {
	srv    *memnode.Server
	member *membership.Member
}

// StartNode starts a memory node and its member of the membership.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	lay := cfg.Layout
	lay.defaults()
	if err := lay.check(len(cfg.Members)); err != nil {
		return nil, err
	}
	if cfg.Server.Memory == 0 {
		cfg.Server.Memory = lay.NodeBytes()
	}
	if cfg.ConfigLease <= 0 {
		cfg.ConfigLease = DefaultConfigLease
	}
	if cfg.Lease <= 0 || cfg.Lease > MaxLease {
		cfg.Lease = MaxLease
	}
	if cfg.Skew <= 0 {
		cfg.Skew = 5 * time.Millisecond
	}
	p := params{configLease: cfg.ConfigLease, lease: cfg.Lease, skew: cfg.Skew}
	m, err := membership.Start(membership.Config{Self: cfg.Self, Addrs: cfg.Members, F: lay.F, Token: cfg.Server.Token,
		Tick: cfg.Tick, Silence: cfg.Silence, Logger: cfg.Logger, Listener: cfg.MemberListener, Params: p.marshal(),
		KeepLastCopy: true})
	if err != nil {
		return nil, fmt.Errorf("ford: node %d's membership: %w", cfg.Self, err)
	}
	srv, err := memnode.Start(ctx, cfg.Server)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &Node{srv: srv, member: m}, nil
}

// Server is the node's memory server (its Info().CM is the address
// clients list in Config.Nodes).
func (n *Node) Server() *memnode.Server { return n.srv }

// Configuration is the configuration the node's member has applied.
func (n *Node) Configuration() Configuration { return n.member.Configuration() }

// Wait waits until the node's member has applied a configuration of
// epoch at least epoch.
func (n *Node) Wait(ctx context.Context, epoch uint64) (Configuration, error) {
	return n.member.Wait(ctx, epoch)
}

// Leader reports whether the node's member leads the membership.
func (n *Node) Leader() bool { return n.member.Leader() }

// StopMembership silences the node's member: the others take the node
// out after their Silence (what a crash does; the memory stays served).
func (n *Node) StopMembership() error { return n.member.Close() }

// Close stops the member and the memory server.
func (n *Node) Close() error {
	n.member.Close()
	return n.srv.Close()
}
