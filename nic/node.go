package nic

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// PathState is how a path between two nodes currently behaves.
type PathState uint8

// Path states.
const (
	// PathUp: requests reach the responder, after Route.Delay.
	PathUp PathState = iota
	// PathBlocked: requests cannot get through now (paused node,
	// partition) but may later; they wait up to the QP's retry budget.
	PathBlocked
	// PathDead: the responder is gone; requests fail with RETRY_EXC_ERR.
	PathDead
)

// Route is the state of the path from one node to another.
type Route struct {
	State PathState
	// Delay is the one-way latency added to each request on the path; a
	// request takes effect and completes after a round trip of 2×Delay.
	Delay time.Duration
}

// Target is a responder as a requester sees it: a *Node in this process,
// whose memory requests reach directly, or a Link to a node in another
// process.
type Target interface {
	Address() string
}

// Network is what a transport tells its nodes about the others.
type Network interface {
	// Resolve returns the node or link with the given address, or an
	// error when it cannot be reached.
	Resolve(address string) (Target, error)
	// ResolveID returns the peer a receive's WC.SrcID names, or an error.
	ResolveID(id uint32) (Target, error)
	// Route reports how the path from a node to a target behaves now. It
	// is called for every request and must be cheap when no faults are
	// injected.
	Route(from *Node, to Target) Route
}

// Config configures a Node.
type Config struct {
	// Address is what peers use to reach the node.
	Address string
	// ID is the node's small numeric identity (WC.SrcID at peers).
	ID uint32
	// Transport names the provider, e.g. "loop".
	Transport string
	// Network resolves peers.
	Network Network
	// Attr overrides the default capabilities where non-zero.
	Attr verbs.DeviceAttr
	// OnClose, if set, runs once when the node is closed.
	OnClose func()
	// MemFD backs every memory region with a memfd (MR.FD) that other
	// processes can map, instead of anonymous memory.
	MemFD bool
	// Locks, if set, replace the node's atomics lock table.
	Locks AtomicLocks
	// Observer, if set, learns of regions and QPs as they change.
	Observer Observer
	// Quiesce, if set, is called by MR.Quiesce after the node's own
	// executions drained: the transport waits for the operations that
	// initiators in other processes run directly (DirectLink.Enter/Exit).
	Quiesce func()
	// DoorbellPerWR flushes the link after every request instead of once
	// per post list: the "no doorbell batching" side of Kalia et al.'s
	// guideline, for ablation.
	DoorbellPerWR bool
	// Idle, if set, is called when a goroutine is about to block in
	// CQ.Wait: nobody may be polling for it now, so a transport that
	// relies on polling goroutines for progress hands it to its own.
	// Awake, if set, is called when that goroutine leaves CQ.Wait: a
	// transport can count the goroutines blocked and drive progress
	// itself while any is (other goroutines may poll meanwhile, but a
	// poll that finds its own completion drives nothing).
	Idle  func()
	Awake func()
	// Progress, if set, is called by CQ.Poll when the CQ is empty: the
	// transport reads whatever responses have arrived, on the polling
	// goroutine, so a busy poller needs no hand-off from another goroutine.
	// It must not block and must be cheap when there is nothing to read.
	Progress func()
	// RecvAreas, if set, publishes receive queues for direct deposit
	// (deposit.go): it returns the area for a queue of depth receives of
	// at most maxSGE entries, or nil to leave the queue unpublished.
	RecvAreas func(depth, maxSGE int) RecvArea
}

// DefaultAttr are the capabilities of a software node.
var DefaultAttr = verbs.DeviceAttr{
	MaxMRSize:         1 << 40,
	MaxQPWR:           1 << 16,
	MaxSGE:            16,
	MaxCQE:            1 << 22,
	MaxInlineData:     1024,
	MTU:               4096,
	MaxMsgSize:        1 << 31,
	MaskedAtomicSizes: 8 | 16 | 32,
}

// Node is one software NIC; it implements verbs.Device.
type Node struct {
	addr  string
	id    uint32
	attr  verbs.DeviceAttr
	net   Network
	keys  *keyTable
	ticks ticks
	cost  atomic.Pointer[costState]
	locks AtomicLocks
	obs   Observer

	mu       sync.Mutex
	qps      atomic.Pointer[map[uint32]*QP]
	qpLow    [qpnSpread]uint16 // live QPs by QPN mod qpnSpread (qpn.go)
	pds      map[*PD]struct{}
	pdSeq    atomic.Uint32 // numbers PDs
	cqs      map[*CQ]struct{}
	srqs     map[*SRQ]struct{}
	closed   atomic.Bool
	onClose  func()
	memfd    bool
	progress func()
	idle     func()
	awake    func()
	quiesce  func()

	recvAreas func(depth, maxSGE int) RecvArea
	areas     atomic.Pointer[[]*recvQueue] // published receive queues (deposit.go)

	doorbellPerWR bool

	sessMu   sync.Mutex
	sessions map[*Session]struct{}
	retired  Stats         // counts of closed sessions
	dropped  atomic.Uint64 // requests from a QP's wrong peer (isolation.go)
}

var _ verbs.Device = (*Node)(nil)

// NewNode creates a node.
func NewNode(c Config) *Node {
	a := DefaultAttr
	a.Transport = c.Transport
	if c.Attr.MaxMRSize != 0 {
		a.MaxMRSize = c.Attr.MaxMRSize
	}
	if c.Attr.MaxQPWR != 0 {
		a.MaxQPWR = c.Attr.MaxQPWR
	}
	if c.Attr.MaxSGE != 0 {
		a.MaxSGE = c.Attr.MaxSGE
	}
	if c.Attr.MaxCQE != 0 {
		a.MaxCQE = c.Attr.MaxCQE
	}
	if c.Attr.MaxInlineData != 0 {
		a.MaxInlineData = c.Attr.MaxInlineData
	}
	if c.Attr.MTU != 0 {
		a.MTU = c.Attr.MTU
	}
	if c.Attr.MaxMsgSize != 0 {
		a.MaxMsgSize = c.Attr.MaxMsgSize
	}
	if c.Attr.MaskedAtomicSizes != 0 {
		a.MaskedAtomicSizes = c.Attr.MaskedAtomicSizes
	}
	n := &Node{
		addr:     c.Address,
		id:       c.ID,
		attr:     a,
		net:      c.Network,
		keys:     newKeyTable(),
		pds:      map[*PD]struct{}{},
		cqs:      map[*CQ]struct{}{},
		srqs:     map[*SRQ]struct{}{},
		onClose:  c.OnClose,
		memfd:    c.MemFD,
		progress: c.Progress,
		idle:     c.Idle,
		awake:    c.Awake,
		quiesce:  c.Quiesce,

		doorbellPerWR: c.DoorbellPerWR,
		sessions:      map[*Session]struct{}{},
		locks:         c.Locks,
		obs:           c.Observer,
	}
	n.recvAreas = c.RecvAreas
	areasInit(n)
	if n.locks == nil {
		n.locks = &lockTable{}
	}
	m := map[uint32]*QP{}
	n.qps.Store(&m)
	live.Store(n, struct{}{})
	return n
}

// Address implements verbs.Device.
func (n *Node) Address() string { return n.addr }

// ID implements verbs.Device.
func (n *Node) ID() uint32 { return n.id }

// Attr implements verbs.Device.
func (n *Node) Attr() verbs.DeviceAttr { return n.attr }

// Closed reports whether the node was closed or crashed.
func (n *Node) Closed() bool { return n.closed.Load() }

// AllocPD implements verbs.Device.
func (n *Node) AllocPD() (verbs.PD, error) {
	if n.closed.Load() {
		return nil, verbs.ErrClosed
	}
	pd := &PD{node: n, id: n.pdSeq.Add(1)}
	n.mu.Lock()
	n.pds[pd] = struct{}{}
	n.mu.Unlock()
	return pd, nil
}

// CreateCQ implements verbs.Device.
func (n *Node) CreateCQ(depth int) (verbs.CQ, error) {
	if n.closed.Load() {
		return nil, verbs.ErrClosed
	}
	if depth <= 0 || depth > n.attr.MaxCQE {
		return nil, fmt.Errorf("%w: CQ depth %d (1 … %d)", verbs.ErrInvalidArg, depth, n.attr.MaxCQE)
	}
	cq := newCQ(n, depth)
	n.mu.Lock()
	n.cqs[cq] = struct{}{}
	n.mu.Unlock()
	return cq, nil
}

// qp returns the node's QP with the given number, or nil.
func (n *Node) qp(qpn uint32) *QP { return (*n.qps.Load())[qpn] }

func (n *Node) addQP(q *QP) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.qps.Load()
	m := make(map[uint32]*QP, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	q.qpn = n.newQPN(m)
	n.qpLow[q.qpn%qpnSpread]++
	m[q.qpn] = q
	n.qps.Store(&m)
}

func (n *Node) removeQP(q *QP) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.qps.Load()
	m := make(map[uint32]*QP, len(old))
	for k, v := range old {
		if v != q {
			m[k] = v
		}
	}
	if len(m) < len(old) {
		n.qpLow[q.qpn%qpnSpread]--
	}
	n.qps.Store(&m)
}

// Close implements verbs.Device: every QP moves to ERROR (flushing its
// work requests), CQ waiters are woken, and later calls fail with
// ErrClosed. Memory regions still registered end their remote access;
// their memory is replaced by fresh anonymous pages (left mapped), so
// that a goroutine still using MR.Bytes() does not fault.
func (n *Node) Close() error {
	if !n.closed.CompareAndSwap(false, true) {
		return nil
	}
	live.Delete(n)
	for _, q := range *n.qps.Load() {
		q.Destroy()
	}
	n.mu.Lock()
	cqs := make([]*CQ, 0, len(n.cqs))
	for cq := range n.cqs {
		cqs = append(cqs, cq)
	}
	n.mu.Unlock()
	for _, cq := range cqs {
		cq.close()
	}
	var mrs []*MR
	for _, m := range *n.keys.rkeys.Load() {
		mrs = append(mrs, m)
	}
	for _, m := range mrs {
		m.deregister(true)
	}
	if n.onClose != nil {
		n.onClose()
	}
	return nil
}

// Crash simulates the node dying: its QPs move to ERROR (flushing into its
// CQs, which stay pollable) without anything being freed. Peers learn of it
// from their Network's Route.
func (n *Node) Crash() {
	for _, q := range *n.qps.Load() {
		q.toError()
	}
}
