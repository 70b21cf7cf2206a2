package farm

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Name is the service a FaRM memory node serves (memnode.Hello.Service).
const Name = "txn-farm"

// RPC methods of a node. Clients call Create, Open and Lock; nodes call
// Fence and Decide on each other during recovery (recovery.go).
const (
	MethodCreate = 1 // layout | u8 node index → ""
	MethodOpen   = 2 // u64 client id → openInfo
	MethodLock   = 3 // LOCK request (record.go) → status | versions or failed index
	MethodFence  = 4 // u64 client | u64 seq | txInfo → u8 per participant: 1 when this node backs it up and holds (or applied) its COMMIT-BACKUP record
	MethodDecide = 5 // u64 client | u64 seq | u8 commit → ""
	MethodConfig = 6 // "" → the node's Configuration (configuration.go), or ErrNoMembership
)

// Defaults of NodeConfig.
const (
	DefaultMaxClients = 64
	DefaultLogSize    = 1 << 20
	DefaultLease      = 500 * time.Millisecond
	DefaultMaxMessage = 64 << 10
	DefaultPollIdle   = 50 * time.Microsecond
)

// NodeConfig configures a node.
type NodeConfig struct {
	// MaxClients bounds the coordinators connected at once: one log ring
	// each (default DefaultMaxClients).
	MaxClients int
	// LogSize is the bytes of each client's log ring (default
	// DefaultLogSize, a multiple of 8, at least 4 × MaxMessage).
	LogSize int
	// Lease is how long a transaction may hold a lock: once a lock is
	// older, the node recovers its transaction (default DefaultLease).
	Lease time.Duration
	// Remember is how long a backup remembers the transactions it applied
	// (committed), to answer recoveries about them (default 20 leases).
	// A recovery that takes longer than that (another node unreachable
	// for as long) may take a committed transaction for aborted.
	Remember time.Duration
	// MaxMessage is the RPC message size, and bounds a transaction's
	// writes to one shard (default DefaultMaxMessage). Clients must use
	// the same.
	MaxMessage int
	// Token is the other nodes' token, presented when this node dials
	// them during recovery.
	Token string
	// PollIdle bounds the pause of the node's log poller when its rings
	// are idle (default DefaultPollIdle): the longest a COMMIT-PRIMARY
	// record waits for the CPU, holding its locks, on an idle node.
	PollIdle time.Duration
	// Logger receives recovery logs (default slog.Default()).
	Logger *slog.Logger
	// Members, when not empty, are the nodes' membership addresses
	// (host:port, TCP) in the layout's order: once it has a layout, the
	// node runs its member of the raft group that holds the database's
	// Configuration there (membership.go), authenticated by Token.
	// Empty: no membership (MethodConfig answers ErrNoMembership).
	Members []string
	// Silence is how long the membership's leader waits for a silent
	// node before it takes it out (default: the lease).
	Silence time.Duration
	// MemberListener, when not nil, is where the node's member of the
	// membership listens instead of its Members address (which must be
	// the listener's); the node closes it.
	MemberListener net.Listener
}

func (c *NodeConfig) defaults() {
	if c.MaxClients <= 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.MaxMessage <= 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.LogSize <= 0 {
		c.LogSize = DefaultLogSize
	}
	c.LogSize = max(c.LogSize&^7, 4*c.MaxMessage)
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Remember <= 0 {
		c.Remember = 20 * c.Lease
	}
	if c.PollIdle <= 0 {
		c.PollIdle = DefaultPollIdle
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Silence <= 0 {
		c.Silence = c.Lease
	}
}

// txKey names a transaction: its coordinator and its number there.
type txKey struct{ client, seq uint64 }

// Node is a FaRM memory node as a memnode.Service: it holds the primary
// copy of one shard and backup copies of F others in one region clients
// READ, one log ring per client in a region clients WRITE, and the
// state of the transactions under way: the locks it holds for them (as
// primary) and the COMMIT-BACKUP records not yet truncated (as backup).
type Node struct {
	cfg NodeConfig
	dev verbs.Device
	pd  verbs.PD
	log *slog.Logger

	rings chan struct{} // a token per log ring the node may still give

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // poller, lease scanner, recoveries

	mu         sync.Mutex
	layout     *Layout // nil before MethodCreate
	index      int
	tables     verbs.MR
	slotSize   int
	sessions   map[*session]struct{}
	locks      map[txKey]*lockRec
	pending    map[txKey]*backupRec
	applied    appliedSet
	recovering map[txKey]bool
	lastSID    uint32
	peers      []*peer
	members    *Membership // nil without NodeConfig.Members
	conf       Configuration
	confs      map[uint64]Configuration // every epoch's, for the records of its sessions
	serving    bool                     // the transactions of the epochs before conf's are all recovered
	stats      NodeStats

	cpu    atomic.Int64 // ns
	closed atomic.Bool
}

var _ memnode.MetricsService = (*Node)(nil)

// Service returns the memnode.NewServiceFunc of a node configured by
// cfg; pass it as memnode.Config.NewService. made, when not nil,
// receives the Node (for its stats).
func Service(cfg NodeConfig, made func(*Node)) memnode.NewServiceFunc {
	return func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
		cfg.defaults()
		n := &Node{cfg: cfg, dev: dev, pd: pd, log: cfg.Logger, rings: make(chan struct{}, cfg.MaxClients),
			sessions: map[*session]struct{}{}, locks: map[txKey]*lockRec{}, pending: map[txKey]*backupRec{},
			recovering: map[txKey]bool{}}
		for range cfg.MaxClients {
			n.rings <- struct{}{}
		}
		n.ctx, n.cancel = context.WithCancel(context.Background())
		n.wg.Add(2)
		go n.poll()
		go n.leases()
		if made != nil {
			made(n)
		}
		return n, nil
	}
}

// Name implements memnode.Service.
func (n *Node) Name() string { return Name }

// Admit implements memnode.Service: FaRM clients and nodes.
func (n *Node) Admit(service string) error { return memnode.AdmitOnly(Name, service) }

// Describe implements memnode.Service: clients learn the regions by
// MethodOpen.
func (n *Node) Describe(*memnode.Info) {}

// Close implements memnode.Service: it stops the node's goroutines and
// releases its memory.
func (n *Node) Close() error {
	n.mu.Lock() // startRecovery adds to wg under n.mu, if not closed
	first := n.closed.CompareAndSwap(false, true)
	n.mu.Unlock()
	if !first {
		return nil
	}
	n.cancel()
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.members != nil {
		n.members.Close()
	} else if n.cfg.MemberListener != nil {
		n.cfg.MemberListener.Close()
	}
	for _, p := range n.peers {
		if p != nil {
			p.close()
		}
	}
	if n.tables != nil {
		return n.tables.Deregister()
	}
	return nil
}

// create is MethodCreate: it lays out the tables once; the same layout
// again succeeds, another fails with ErrLayout.
func (n *Node) create(req, _ []byte) (int, error) {
	if len(req) < 1 {
		return 0, fmt.Errorf("%w: an empty create", ErrProtocol)
	}
	l, err := unmarshalLayout(req[:len(req)-1])
	if err != nil {
		return 0, err
	}
	idx := int(req[len(req)-1])
	if idx >= len(l.Nodes) {
		return 0, fmt.Errorf("%w: node %d of %d", ErrLayout, idx, len(l.Nodes))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.layout != nil {
		if !n.layout.equal(&l) || n.index != idx {
			return 0, fmt.Errorf("%w: this node holds another layout", ErrLayout)
		}
		return 0, nil
	}
	size := l.SlotSize()
	mr, err := n.pd.AllocMR((l.F+1)*l.Buckets*size, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	if err != nil {
		return 0, fmt.Errorf("farm: tables: %w", err)
	}
	if len(n.cfg.Members) > 0 {
		m, err := StartMembership(MembershipConfig{Self: idx, Addrs: n.cfg.Members, Layout: l, Token: n.cfg.Token,
			Silence: n.cfg.Silence, Logger: n.log, Listener: n.cfg.MemberListener})
		if err != nil {
			mr.Deregister()
			return 0, err
		}
		n.members = m
	}
	n.layout, n.index, n.tables, n.slotSize = &l, idx, mr, size
	n.conf, n.serving = InitialConfiguration(l), true
	n.confs = map[uint64]Configuration{n.conf.Epoch: n.conf}
	if n.members != nil {
		n.wg.Add(1)
		go n.follow()
	}
	n.peers = make([]*peer, len(l.Nodes))
	return 0, nil
}

// openInfo is MethodOpen's answer: u64 tables address | u32 tables rkey
// | u32 ring rkey | u64 ring address | u32 ring size | u32 session id |
// layout.
const openFixed = 32

// open is MethodOpen for session s: it gives the client a log ring.
func (n *Node) open(s *session, req, resp []byte) (int, error) {
	if len(req) != 8 && len(req) != 16 {
		return 0, fmt.Errorf("%w: a %d-byte open", ErrProtocol, len(req))
	}
	id := binary.LittleEndian.Uint64(req)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.layout == nil {
		return 0, ErrNoLayout
	}
	if n.members != nil {
		// A session lives in one epoch: the client routes by that
		// epoch's configuration, and the node fences the session when
		// the epoch ends.
		switch {
		case len(req) != 16 || binary.LittleEndian.Uint64(req[8:]) != n.conf.Epoch:
			return 0, fmt.Errorf("%w: the node is at epoch %d", ErrEpoch, n.conf.Epoch)
		case !n.serving:
			return 0, fmt.Errorf("%w: the node is recovering epoch %d's transactions", ErrEpoch, n.conf.Epoch-1)
		}
	}
	if s.ring != nil || s.fenced {
		return 0, fmt.Errorf("%w: opened twice", ErrProtocol)
	}
	select {
	case <-n.rings:
	default:
		return 0, fmt.Errorf("%w: %d clients", ErrBusy, n.cfg.MaxClients)
	}
	// A region of its own: fencing the client waits out the writes to it
	// only (verbs.FreeLists.Quiesce), not every client's.
	mr, err := n.pd.AllocMR(ringHead+n.cfg.LogSize, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		n.rings <- struct{}{}
		return 0, fmt.Errorf("farm: log ring: %w", err)
	}
	n.lastSID++
	s.epoch = n.conf.Epoch
	s.client, s.id, s.ringMR, s.ring = id, n.lastSID, mr, &ringReader{ring: mr.Bytes(), size: n.cfg.LogSize}
	b := resp[:0]
	b = binary.LittleEndian.AppendUint64(b, n.tables.Addr())
	b = binary.LittleEndian.AppendUint32(b, n.tables.RKey())
	b = binary.LittleEndian.AppendUint32(b, mr.RKey())
	b = binary.LittleEndian.AppendUint64(b, mr.Addr())
	b = binary.LittleEndian.AppendUint32(b, uint32(n.cfg.LogSize))
	b = binary.LittleEndian.AppendUint32(b, s.id)
	b = append(b, n.layout.marshal()...)
	if len(b) > len(resp) {
		return 0, fmt.Errorf("%w: layout too large for a message", ErrProtocol)
	}
	return len(b), nil
}

// Errors of nodes.
var (
	// ErrNoLayout: the node has no tables yet (no MethodCreate).
	ErrNoLayout = fmt.Errorf("farm: node has no layout")
	// ErrBusy: the node serves MaxClients coordinators already.
	ErrBusy = fmt.Errorf("farm: node busy")
	// ErrEpoch: the client's configuration is not the node's (one of
	// them is behind), or the node is still recovering the previous
	// epoch's transactions; the client learns the configuration again
	// (MethodConfig) and retries.
	ErrEpoch = fmt.Errorf("farm: stale epoch")
	// ErrFenced: a LOCK through a session the node fenced (a recovery,
	// or a new epoch): the client redials.
	ErrFenced = fmt.Errorf("farm: session fenced")
)

// clientCQ is the depth of a session's CQ.
const clientCQ = 1024

// QPCap is the queue sizes of a connection (both ends).
var QPCap = verbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 64, MaxInlineData: verbs.DefaultMaxInlineData}

// rpcSlots is the calls in flight on a connection, rpcRecvs the receives
// a node posts for them.
const (
	rpcSlots = 16
	rpcRecvs = 32
)

// Open implements memnode.Service: a connection's CQ and RPC server.
func (n *Node) Open() (memnode.Session, error) {
	cq, err := n.dev.CreateCQ(clientCQ)
	if err != nil {
		return nil, err
	}
	s := &session{n: n, cq: cq,
		rpc: rpc.NewServer(rpc.ServerConfig{MaxMessage: n.cfg.MaxMessage, Recvs: rpcRecvs, Poll: verbs.PollEvent})}
	s.rpc.Handle(MethodCreate, n.create)
	s.rpc.Handle(MethodOpen, func(req, resp []byte) (int, error) { return n.open(s, req, resp) })
	s.rpc.Handle(MethodLock, func(req, resp []byte) (int, error) { return n.lock(s, req, resp) })
	s.rpc.Handle(MethodFence, n.fenceCall)
	s.rpc.Handle(MethodDecide, n.decideCall)
	s.rpc.Handle(MethodConfig, n.configCall)
	n.mu.Lock()
	n.sessions[s] = struct{}{}
	n.mu.Unlock()
	return s, nil
}

// session is one connection: a client's (after MethodOpen: its log
// ring) or another node's.
type session struct {
	n    *Node
	cq   verbs.CQ
	rpc  *rpc.Server
	conn *rpc.ServerConn

	// Under n.mu.
	qp     verbs.QP
	client uint64
	epoch  uint64   // the configuration's epoch at MethodOpen
	id     uint32   // the session's id at the node (from 1)
	ringMR verbs.MR // the client's log ring (after MethodOpen)
	ring   *ringReader
	fenced bool               // no record of its ring is taken any more
	end    context.CancelFunc // ends Serve, and with it the connection
	closed time.Time          // when the connection ended (zero while it lasts)
}

// Options implements memnode.Session.
func (s *session) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: QPCap, Access: verbs.AccessAll, Timeout: ClientTimeout}
}

// Prepare posts the connection's RPC receives before the peer may send.
func (s *session) Prepare(qp verbs.QP) error {
	c, err := s.rpc.Attach(s.n.pd, qp)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

// Serve implements memnode.Session.
func (s *session) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	ctx, end := context.WithCancel(ctx)
	defer end()
	s.n.mu.Lock()
	s.qp, s.end = qp, end
	fenced := s.fenced
	s.n.mu.Unlock()
	if fenced {
		return fmt.Errorf("farm: client %#x fenced", s.client)
	}
	if s.conn == nil {
		return s.rpc.Serve(ctx, s.n.pd, qp, cq)
	}
	return s.conn.Serve(ctx, cq)
}

// Close implements memnode.Session: the connection is gone. Its QP is
// destroyed, so nothing more lands in its ring: the node takes what did,
// frees the ring, and recovers the transactions that hold locks here
// through it (their coordinator cannot commit them at this node any
// more). Their COMMIT-BACKUP records wait a lease for truncations first:
// a live coordinator that reconnected sends them (leases).
func (s *session) Close() error {
	n := s.n
	n.mu.Lock()
	n.stopSession(s)
	s.closed = time.Now()
	delete(n.sessions, s)
	var ringMR verbs.MR
	if s.ringMR != nil {
		ringMR, s.ring, s.ringMR = s.ringMR, nil, nil
	}
	todo := n.unresolved(s)
	n.mu.Unlock()
	for _, t := range todo {
		n.startRecovery(t)
	}
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	if e := s.cq.Destroy(); err == nil {
		err = e
	}
	if ringMR != nil {
		if e := ringMR.Deregister(); err == nil {
			err = e
		}
		n.rings <- struct{}{}
	}
	return err
}
