package farm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Membership is a node's member of the raft group (go.etcd.io/raft/v3)
// that holds a database's Configuration. Every node of the layout is a
// voter from the start; the group needs a majority of them alive to
// change the configuration.
//
// How a node is taken out: the raft leader notes when it last heard
// from each member (raft's own heartbeats, answered every tick); one
// silent for longer than MembershipConfig.Silence is proposed out, and
// once the proposal commits every member applies it the same way
// (Configuration.remove): the node leaves every shard, each shard it
// was primary of is promoted to its first backup, and the epoch moves on.
//
// The raft log lives in memory (raft.MemoryStorage): a node that
// restarts comes back empty and stays out. The configuration removed it
// already (it was silent long enough for that), and nothing brings a
// node back: its raft identity is not reused.
type Membership struct {
	cfg  MembershipConfig
	rn   raft.Node
	st   *raft.MemoryStorage
	net  *raftNet
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	conf     Configuration
	changed  chan struct{} // closed and replaced at each change
	heard    []time.Time   // when the leader last heard each member
	leader   bool
	proposed map[int]time.Time // members proposed out, when
}

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

// Ticks of the membership's raft.
const (
	electionTicks  = 10
	heartbeatTicks = 1
)

// ErrMembershipClosed: the membership was closed.
var ErrMembershipClosed = errors.New("farm: membership closed")

// StartMembership starts this node's member of the group and its
// transport.
func StartMembership(cfg MembershipConfig) (*Membership, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.Silence <= 0 {
		cfg.Silence = DefaultLease
	}
	cfg.Silence = max(cfg.Silence, 20*cfg.Tick)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
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
	m := &Membership{cfg: cfg, st: raft.NewMemoryStorage(), log: cfg.Logger, stop: make(chan struct{}),
		conf: InitialConfiguration(l), changed: make(chan struct{}), heard: make([]time.Time, len(l.Nodes)),
		proposed: map[int]time.Time{}}
	now := time.Now()
	for i := range m.heard {
		m.heard[i] = now
	}
	m.net, err = listenRaft(cfg.Self, cfg.Addrs, cfg.Listener, cfg.Token, cfg.Logger, m.receive, m.heardFrom)
	if err != nil {
		return nil, err
	}
	peers := make([]raft.Peer, len(l.Nodes))
	for i := range peers {
		peers[i] = raft.Peer{ID: uint64(i + 1)}
	}
	m.rn = raft.StartNode(&raft.Config{ID: uint64(cfg.Self + 1), ElectionTick: electionTicks, HeartbeatTick: heartbeatTicks,
		Storage: m.st, MaxSizePerMsg: 64 << 10, MaxInflightMsgs: 64, CheckQuorum: true, PreVote: true,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}}, peers)
	m.wg.Add(1)
	go m.run()
	return m, nil
}

// Configuration returns the configuration this member has applied.
func (m *Membership) Configuration() Configuration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conf.Clone()
}

// Wait waits until this member has applied a configuration of epoch at
// least epoch, and returns it.
func (m *Membership) Wait(ctx context.Context, epoch uint64) (Configuration, error) {
	for {
		m.mu.Lock()
		c, ch := m.conf, m.changed
		if c.Epoch >= epoch {
			m.mu.Unlock()
			return c.Clone(), nil
		}
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Configuration{}, ctx.Err()
		case <-m.stop:
			return Configuration{}, ErrMembershipClosed
		}
	}
}

// Leader reports whether this member leads the group now.
func (m *Membership) Leader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leader
}

// Close stops the member: to the others, it falls silent.
func (m *Membership) Close() error {
	select {
	case <-m.stop:
		return nil
	default:
	}
	close(m.stop)
	m.wg.Wait()
	m.rn.Stop()
	m.net.close()
	return nil
}

// receive hands a message from the transport to raft.
func (m *Membership) receive(msg raftpb.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Tick*electionTicks)
	defer cancel()
	_ = m.rn.Step(ctx, msg) // only fails once stopped or timed out: raft retries
}

// heardFrom notes that member i spoke.
func (m *Membership) heardFrom(i int) {
	m.mu.Lock()
	m.heard[i] = time.Now()
	m.mu.Unlock()
}

// run is raft's loop: ticks, and each Ready persisted (in memory), sent
// and applied, then Advance.
func (m *Membership) run() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.rn.Tick()
			m.detect()
		case rd := <-m.rn.Ready():
			m.ready(rd)
		}
	}
}

// ready handles one raft.Ready.
func (m *Membership) ready(rd raft.Ready) {
	if !raft.IsEmptySnap(rd.Snapshot) {
		_ = m.st.ApplySnapshot(rd.Snapshot)
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		_ = m.st.SetHardState(rd.HardState)
	}
	_ = m.st.Append(rd.Entries)
	if rd.SoftState != nil {
		m.lead(rd.SoftState.RaftState == raft.StateLeader)
	}
	for _, msg := range rd.Messages {
		m.net.send(msg)
	}
	for _, e := range rd.CommittedEntries {
		m.apply(e)
	}
	m.rn.Advance()
}

// lead notes whether this member leads; a new leader starts every
// member's silence afresh (followers hear only from the leader).
func (m *Membership) lead(leader bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if leader && !m.leader {
		now := time.Now()
		for i := range m.heard {
			m.heard[i] = now
		}
		clear(m.proposed)
	}
	m.leader = leader
}

// apply applies a committed entry.
func (m *Membership) apply(e raftpb.Entry) {
	switch e.Type {
	case raftpb.EntryConfChange: // the bootstrap's voters
		var cc raftpb.ConfChange
		if err := cc.Unmarshal(e.Data); err == nil {
			m.rn.ApplyConfChange(cc)
		}
		return
	case raftpb.EntryNormal:
	default:
		return
	}
	if len(e.Data) == 0 {
		return // a new leader's empty entry
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	changed, err := m.conf.applyCommand(e.Data)
	if err != nil {
		m.log.Error("farm: membership: a command that does not decode; skipped", "index", e.Index, "err", err)
		return
	}
	if changed {
		m.log.Warn("farm: membership: a node is out", "epoch", m.conf.Epoch, "primaries", m.conf.Primaries)
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// detect, at the leader, proposes out each member silent for longer
// than Silence (again a Silence later if the proposal was lost).
func (m *Membership) detect() {
	m.mu.Lock()
	var out []int
	if m.leader {
		now := time.Now()
		for i, h := range m.heard {
			if i == m.cfg.Self || m.conf.Out[i] || now.Sub(h) <= m.cfg.Silence {
				continue
			}
			if p, ok := m.proposed[i]; ok && now.Sub(p) <= m.cfg.Silence {
				continue
			}
			m.proposed[i] = now
			out = append(out, i)
		}
	}
	m.mu.Unlock()
	for _, i := range out {
		m.log.Warn("farm: membership: a node is silent; proposing it out", "node", i, "silence", m.cfg.Silence)
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Silence)
		err := m.rn.Propose(ctx, removeCommand(i))
		cancel()
		if err != nil {
			m.log.Warn("farm: membership: proposal failed", "node", i, "err", err)
		}
	}
}
