package farm

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/rdmakit/rdmakit/txn/internal/membership"
)

// Membership is a node's member of the raft group that holds a
// database's Configuration (package txn/internal/membership, shared with
// txn/ford): every node of the layout is a voter from the start; the
// leader takes out a node silent for longer than MembershipConfig.Silence,
// each shard it was primary of is promoted to its first backup, and the
// epoch moves on. The raft log lives in memory: a node that restarts
// comes back empty and stays out.
type Membership = membership.Member

// MembershipConfig configures a Membership.
type MembershipConfig struct {
	// Self is this node's index in the layout.
	Self int
	// Addrs are the members' membership addresses (host:port, TCP), in
	// the layout's order; Addrs[Self] is where this member listens.
	Addrs []string
	// Layout is the database's layout: its placement is epoch 1.
	Layout Layout
	// Token authenticates the members to each other.
	Token string
	// Tick is raft's tick (default 10 ms): heartbeats go every tick, an
	// election starts after 10 silent ticks.
	Tick time.Duration
	// Silence is how long the leader waits for a member before it
	// proposes it out (default DefaultLease; at least 20 ticks).
	Silence time.Duration
	// Logger receives membership logs (default slog.Default()).
	Logger *slog.Logger
	// Listener, when not nil, is where this member listens instead of
	// Addrs[Self] (which must be its address); the member closes it.
	Listener net.Listener
}

// ErrMembershipClosed: the membership was closed.
var ErrMembershipClosed = membership.ErrClosed

// StartMembership starts this node's member of the group and its
// transport.
func StartMembership(cfg MembershipConfig) (*Membership, error) {
	if cfg.Silence <= 0 {
		cfg.Silence = DefaultLease
	}
	l := cfg.Layout
	l.defaults()
	err := l.check()
	if err == nil && (len(cfg.Addrs) != len(l.Nodes) || cfg.Self < 0 || cfg.Self >= len(l.Nodes)) {
		err = fmt.Errorf("%w: membership of node %d with %d addresses for %d nodes", ErrLayout, cfg.Self, len(cfg.Addrs), len(l.Nodes))
	}
	if err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	return membership.Start(membership.Config{Self: cfg.Self, Addrs: cfg.Addrs, F: l.F, Token: cfg.Token, Tick: cfg.Tick,
		Silence: cfg.Silence, Logger: cfg.Logger, Listener: cfg.Listener})
}
