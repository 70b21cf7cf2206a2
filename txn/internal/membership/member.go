package membership

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

// Member is a node's member of the raft group (go.etcd.io/raft/v3)
// that holds a database's Configuration. Every node is a voter from the
// start; the group needs a majority of them alive to change the
// configuration.
//
// How a node is taken out: the raft leader notes when it last heard
// from each member (raft's own heartbeats, answered every tick); one
// silent for longer than Config.Silence is proposed out, and
// once the proposal commits every member applies it the same way
// (Configuration.remove): the node leaves every shard, each shard it
// was primary of is promoted to its first backup, and the epoch moves on.
//
// The raft log lives in memory (raft.MemoryStorage): a node that
// restarts comes back empty and stays out. The configuration removed it
// already (it was silent long enough for that), and nothing brings a
// node back: its raft identity is not reused.
type Member struct {
	cfg  Config
	rn   raft.Node
	st   *raft.MemoryStorage
	net  *raftNet
	log  *slog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	conf      Configuration
	appliedAt time.Time     // when conf was applied here
	changed   chan struct{} // closed and replaced at each change
	heard     []time.Time   // when the leader last heard each member
	leader    bool
	proposed  map[int]time.Time // members proposed out, when
	applied   uint64            // the index of the last entry applied
	readSeq   uint64
	reads     map[uint64]chan uint64 // linearizable reads waiting for their index
}

// Config configures a Member.
type Config struct {
	// Self is this node's index in the layout.
	Self int
	// Addrs are the members' membership addresses (host:port, TCP), in
	// the layout's order; Addrs[Self] is where this member listens.
	Addrs []string
	// F is the backups of each shard: Initial(len(Addrs), F) is epoch 1.
	F int
	// Token authenticates the members to each other.
	Token string
	// Tick is raft's tick (default 10 ms): heartbeats go every tick, an
	// election starts after 10 silent ticks.
	Tick time.Duration
	// Silence is how long the leader waits for a member before it
	// proposes it out (default DefaultSilence; at least 20 ticks).
	Silence time.Duration
	// Logger receives membership logs (default slog.Default()).
	Logger *slog.Logger
	// Listener, when not nil, is where this member listens instead of
	// Addrs[Self] (which must be its address); the member closes it.
	Listener net.Listener
	// Params are bytes every answer to a client's query carries after
	// the configuration (the protocol's own parameters: leases).
	Params []byte
	// KeepLastCopy keeps in a silent node that holds the last copy of a
	// shard: taking it out would not save the shard, and a node that was
	// only slow would take the shard's data with it.
	KeepLastCopy bool
}

// Ticks of the membership's raft.
const (
	electionTicks  = 10
	heartbeatTicks = 1
)

// DefaultSilence is Config.Silence's default.
const DefaultSilence = 500 * time.Millisecond

// ErrClosed: the member was closed.
var ErrClosed = errors.New("membership: closed")

// Start starts this node's member of the group and its transport.
func Start(cfg Config) (*Member, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.Silence <= 0 {
		cfg.Silence = DefaultSilence
	}
	cfg.Silence = max(cfg.Silence, 20*cfg.Tick)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	nodes := len(cfg.Addrs)
	if nodes < 2 || nodes > 255 || cfg.F < 0 || cfg.F >= nodes || cfg.Self < 0 || cfg.Self >= nodes {
		err := fmt.Errorf("%w: member %d of %d nodes with %d backups per shard", ErrConfig, cfg.Self, nodes, cfg.F)
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	m := &Member{cfg: cfg, st: raft.NewMemoryStorage(), log: cfg.Logger, stop: make(chan struct{}), appliedAt: time.Now(),
		conf: Initial(nodes, cfg.F), changed: make(chan struct{}), heard: make([]time.Time, nodes),
		proposed: map[int]time.Time{}, reads: map[uint64]chan uint64{}}
	now := time.Now()
	for i := range m.heard {
		m.heard[i] = now
	}
	var err error
	m.net, err = listenRaft(cfg.Self, cfg.Addrs, cfg.Listener, cfg.Token, cfg.Logger, m.receive, m.heardFrom, m.answer)
	if err != nil {
		return nil, err
	}
	peers := make([]raft.Peer, nodes)
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
func (m *Member) Configuration() Configuration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conf.Clone()
}

// Wait waits until this member has applied a configuration of epoch at
// least epoch, and returns it.
func (m *Member) Wait(ctx context.Context, epoch uint64) (Configuration, error) {
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
			return Configuration{}, ErrClosed
		}
	}
}

// Leader reports whether this member leads the group now.
func (m *Member) Leader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leader
}

// Close stops the member: to the others, it falls silent.
func (m *Member) Close() error {
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
func (m *Member) receive(msg raftpb.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Tick*electionTicks)
	defer cancel()
	_ = m.rn.Step(ctx, msg) // only fails once stopped or timed out: raft retries
}

// heardFrom notes that member i spoke.
func (m *Member) heardFrom(i int) {
	m.mu.Lock()
	m.heard[i] = time.Now()
	m.mu.Unlock()
}

// run is raft's loop: ticks, and each Ready persisted (in memory), sent
// and applied, then Advance.
func (m *Member) run() {
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
func (m *Member) ready(rd raft.Ready) {
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
		m.mu.Lock()
		m.applied = e.Index
		m.mu.Unlock()
	}
	for _, rs := range rd.ReadStates {
		m.readDone(rs)
	}
	m.rn.Advance()
}

// lead notes whether this member leads; a new leader starts every
// member's silence afresh (followers hear only from the leader).
func (m *Member) lead(leader bool) {
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
func (m *Member) apply(e raftpb.Entry) {
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
	changed, err := m.conf.ApplyCommand(e.Data)
	if err != nil {
		m.log.Error("membership: a command that does not decode; skipped", "index", e.Index, "err", err)
		return
	}
	if changed {
		m.log.Warn("membership: a node is out", "epoch", m.conf.Epoch, "primaries", m.conf.Primaries)
		m.appliedAt = time.Now()
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// detect, at the leader, proposes out each member silent for longer
// than Silence (again a Silence later if the proposal was lost).
func (m *Member) detect() {
	m.mu.Lock()
	var out []int
	if m.leader {
		now := time.Now()
		for i, h := range m.heard {
			if i == m.cfg.Self || m.conf.Out[i] || now.Sub(h) <= m.cfg.Silence {
				continue
			}
			if m.cfg.KeepLastCopy && m.conf.LastCopy(i) {
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
		m.log.Warn("membership: a node is silent; proposing it out", "node", i, "silence", m.cfg.Silence)
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Silence)
		err := m.rn.Propose(ctx, RemoveCommand(i))
		cancel()
		if err != nil {
			m.log.Warn("membership: proposal failed", "node", i, "err", err)
		}
	}
}
