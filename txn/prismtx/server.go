package prismtx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Name is the service a PRISM-TX memory node serves (memnode.Hello.Service).
const Name = "txn-prismtx"

// The node's RPC methods (package rpc; payloads little-endian). Nothing
// of a transaction goes through them: they set a client up.
const (
	// MethodInfo: request empty; response the shard's layout (infoLen
	// bytes, see Node.info).
	MethodInfo = 1
	// MethodClaim: request u16 client id; response u8 1. The id is the
	// connection's until MethodRelease. An id another connection holds,
	// or one whose connection ended without releasing it (its prepared
	// timestamps may still be in the table), fails with ErrIDTaken.
	MethodClaim = 2
	// MethodRelease: request u16 client id; response u8 1. The client
	// gives back an id none of whose transactions is left unresolved.
	MethodRelease = 3
)

// ErrIDTaken: the client id is held, or was held by a client that ended
// without releasing it.
var ErrIDTaken = errors.New("prismtx: client id taken")

// NodeConfig sizes a PRISM-TX memory node (one shard).
type NodeConfig struct {
	// Slots is the number of record slots (default 1<<16): the most
	// keys the shard holds. A slot, once a key claimed it, stays that
	// key's (a deleted record keeps it with a tombstone version).
	Slots int
	// Memory is the bytes of versions (default 64 MiB).
	Memory int
	// Stock is the bytes of free buffers each size class keeps posted
	// (default 1 MiB).
	Stock int
	// Restock is how often the node tops the free lists up and recycles
	// returned versions (default 200 µs).
	Restock time.Duration
	// ReturnSlots sizes the return ring (default 4096).
	ReturnSlots int
}

func (c *NodeConfig) defaults() {
	if c.Slots <= 0 {
		c.Slots = 1 << 16
	}
	if c.Memory <= 0 {
		c.Memory = 64 << 20
	}
	if c.Stock <= 0 {
		c.Stock = 1 << 20
	}
	if c.Restock <= 0 {
		c.Restock = 200 * time.Microsecond
	}
	if c.ReturnSlots <= 0 {
		c.ReturnSlots = 4096
	}
}

// Buffer classes: 64 B to 8 KiB (the largest item, 4,176 bytes, fits).
const (
	minBuf = 64
	maxBuf = 8 << 10
	// tail is the room after the last buffer: a GET reads a fixed number
	// of bytes through a slot's pointer (the item's length is not in the
	// slot), which may run past a small item, never past the region.
	tail = maxBuf
)

// infoLen is the size of MethodInfo's response.
const infoLen = 48

// Node is one PRISM-TX shard as a memnode.Service: the table of slots,
// the versions, the decision records and the return ring in one region
// that clients reach by one-sided operations only. Its CPU restocks the
// free lists and recycles returned versions (Node.CPU); the RPC methods
// only set clients up.
type Node struct {
	cfg  NodeConfig
	dev  verbs.Device
	pd   verbs.PD
	mr   verbs.MR
	pool *prism.Pool
	ring *prism.ReturnRing
	lay  layout
	cpu  atomic.Int64

	mu     sync.Mutex
	claims map[uint16]*session // ids held by a live connection
	burned map[uint16]bool     // ids whose connection ended holding them

	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// layout is where the parts of a node's region are (addresses).
type layout struct {
	Base      uint64 // slot 0
	RKey      uint32
	Slots     uint32
	Absent    uint64 // the absent item
	Records   uint64 // client id 0's decision record
	Ring      uint64
	RingSlots uint32
}

// slot is the address of slot i.
func (l layout) slot(i int) uint64 { return l.Base + uint64(i)*slotSize }

// record is the address of client id's decision record.
func (l layout) record(id uint16) uint64 { return l.Records + uint64(id)*recordSize }

func (l layout) marshal(b []byte) int {
	binary.LittleEndian.PutUint64(b, l.Base)
	binary.LittleEndian.PutUint32(b[8:], l.RKey)
	binary.LittleEndian.PutUint32(b[12:], l.Slots)
	binary.LittleEndian.PutUint64(b[16:], l.Absent)
	binary.LittleEndian.PutUint64(b[24:], l.Records)
	binary.LittleEndian.PutUint64(b[32:], l.Ring)
	binary.LittleEndian.PutUint32(b[40:], l.RingSlots)
	return infoLen
}

func unmarshalLayout(b []byte) (layout, error) {
	if len(b) != infoLen {
		return layout{}, fmt.Errorf("%w: a %d-byte layout", ErrProtocol, len(b))
	}
	l := layout{Base: binary.LittleEndian.Uint64(b), RKey: binary.LittleEndian.Uint32(b[8:]),
		Slots: binary.LittleEndian.Uint32(b[12:]), Absent: binary.LittleEndian.Uint64(b[16:]),
		Records: binary.LittleEndian.Uint64(b[24:]), Ring: binary.LittleEndian.Uint64(b[32:]),
		RingSlots: binary.LittleEndian.Uint32(b[40:])}
	if l.Slots == 0 || l.RingSlots == 0 {
		return layout{}, fmt.Errorf("%w: a layout of %d slots, %d ring slots", ErrProtocol, l.Slots, l.RingSlots)
	}
	return l, nil
}

// ErrProtocol: a node answered something that does not decode.
var ErrProtocol = errors.New("prismtx: protocol error")

// Service returns the memnode.NewServiceFunc of a PRISM-TX node
// configured by cfg; made, when not nil, receives the Node.
func Service(cfg NodeConfig, made func(*Node)) memnode.NewServiceFunc {
	return func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
		n, err := newNode(dev, pd, cfg)
		if err != nil {
			return nil, err
		}
		if made != nil {
			made(n)
		}
		return n, nil
	}
}

// poolMR is the node's region as its pool sees it: without the tail, so
// that no buffer ends where a fixed-length read through it would leave
// the region.
type poolMR struct {
	verbs.MR
	verbs.FreeLists
	n int
}

func (m poolMR) Len() int { return m.n }

// newNode lays a shard out in a new region of pd and starts its restock
// loop.
//
//	[0, 64·Slots)   slots
//	absent (↑64)    the absent item
//	records (↑64)   16 bytes per client id
//	ring (↑64)      the return ring
//	pool (↑maxBuf)  versions, Memory bytes, then tail bytes no buffer uses
func newNode(dev verbs.Device, pd verbs.PD, cfg NodeConfig) (*Node, error) {
	cfg.defaults()
	absentOff := uint64(cfg.Slots) * slotSize
	recOff := absentOff + absentItemSize
	ringOff := recOff + recordsBytes
	poolOff := (ringOff + uint64(prism.ReturnRingSize(cfg.ReturnSlots)) + maxBuf - 1) &^ (maxBuf - 1)
	size := int(poolOff) + cfg.Memory + tail
	mr, err := pd.AllocMR(size, verbs.AccessAll)
	if err != nil {
		return nil, fmt.Errorf("prismtx: %w", err)
	}
	fl, ok := mr.(verbs.FreeLists)
	if !ok {
		mr.Deregister()
		return nil, fmt.Errorf("prismtx: %w: the device has no free lists (ALLOCATE)", verbs.ErrNotSupported)
	}
	b := mr.Bytes()
	putItem(b[absentOff:], 0, nil, nil, flagAbsent)
	absent := mr.Addr() + absentOff
	for i := range cfg.Slots {
		binary.NativeEndian.PutUint64(b[uint64(i)*slotSize+8*wPtr:], absent)
	}
	ring, err := prism.NewReturnRing(mr, int(ringOff), cfg.ReturnSlots)
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("prismtx: %w", err)
	}
	pool, err := prism.NewPool(poolMR{MR: mr, FreeLists: fl, n: size - tail},
		prism.PoolConfig{MinSize: minBuf, MaxSize: maxBuf, Stock: 4, StockBytes: cfg.Stock, Offset: poolOff})
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("prismtx: %w", err)
	}
	n := &Node{cfg: cfg, dev: dev, pd: pd, mr: mr, pool: pool, ring: ring,
		lay: layout{Base: mr.Addr(), RKey: mr.RKey(), Slots: uint32(cfg.Slots), Absent: absent,
			Records: mr.Addr() + recOff, Ring: ring.Addr(), RingSlots: uint32(ring.Slots())},
		claims: map[uint16]*session{}, burned: map[uint16]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go n.restock()
	return n, nil
}

// CPU is the time the node's CPU spent on the shard: restocking the free
// lists and recycling returned versions. Transactions cost it nothing.
func (n *Node) CPU() time.Duration { return time.Duration(n.cpu.Load()) }

// Stats are the node's version buffer counters.
func (n *Node) Stats() prism.PoolStats { return n.pool.Stats() }

// SetRingGrace sets how long the return ring waits for a reserved slot
// a client never filled (prism.HoleGrace by default).
func (n *Node) SetRingGrace(d time.Duration) { n.ring.SetHoleGrace(d) }

// restock keeps the free lists stocked and recycles returned versions
// after quiescing the NIC, every NodeConfig.Restock.
func (n *Node) restock() {
	defer close(n.done)
	t := time.NewTicker(n.cfg.Restock)
	defer t.Stop()
	full := false
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		t0 := time.Now()
		if _, err := n.ring.Drain(n.pool); err != nil {
			slog.Warn("prismtx: return ring", "err", err)
		}
		err := n.pool.Restock()
		if n.pool.Pending() > 0 {
			if _, e := n.pool.Reclaim(); e != nil && !errors.Is(e, prism.ErrPoolFull) {
				err = e
			}
		}
		switch {
		case errors.Is(err, prism.ErrPoolFull):
			if !full {
				slog.Debug("prismtx: version memory all carved; writes live on recycled buffers")
			}
			full = true
		case err != nil:
			slog.Warn("prismtx: restock", "err", err)
		}
		n.cpu.Add(int64(time.Since(t0)))
	}
}

// Name implements memnode.Service.
func (n *Node) Name() string { return Name }

// Admit implements memnode.Service: PRISM-TX clients only.
func (n *Node) Admit(service string) error { return memnode.AdmitOnly(Name, service) }

// Describe implements memnode.Service: the layout travels by RPC.
func (n *Node) Describe(*memnode.Info) {}

// Close implements memnode.Service: it stops the restock loop and
// releases the region.
func (n *Node) Close() error {
	var err error
	n.closed.Do(func() {
		close(n.stop)
		<-n.done
		err = n.mr.Deregister()
	})
	return err
}

// QPCap is the queue sizes of a client's connection (both ends).
var QPCap = verbs.QPCap{MaxSendWR: 2048, MaxRecvWR: 64, MaxInlineData: verbs.DefaultMaxInlineData}

// Timeouts of clients' connections, as a block store replica's: an
// ALLOCATE that finds its free list empty is retried until the node
// restocks.
const (
	ClientTimeout  = 250 * time.Millisecond
	ClientMinRNR   = 5 * time.Millisecond
	ClientRNRRetry = verbs.InfiniteRNRRetry
)

// DialOptions are the cm options of a client's connection to a node.
func DialOptions(pd verbs.PD, cq verbs.CQ, token string) cm.Options {
	return cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap, Access: verbs.AccessAll,
		MinRNRTimer: ClientMinRNR, RNRRetry: ClientRNRRetry, Timeout: ClientTimeout,
		PrivateData: memnode.Hello{Service: Name, Token: token}.Marshal()}
}

// rpcMessage is the RPC message size of a node's methods.
const rpcMessage = rpc.Header + 64

// Open implements memnode.Service: a client's CQ and RPC server.
func (n *Node) Open() (memnode.Session, error) {
	cq, err := n.dev.CreateCQ(1024)
	if err != nil {
		return nil, err
	}
	s := &session{n: n, cq: cq, ids: map[uint16]bool{},
		rpc: rpc.NewServer(rpc.ServerConfig{MaxMessage: rpcMessage, Recvs: 16, Poll: verbs.PollEvent})}
	s.rpc.Handle(MethodInfo, func(_, resp []byte) (int, error) { return n.lay.marshal(resp), nil })
	s.rpc.Handle(MethodClaim, s.claim)
	s.rpc.Handle(MethodRelease, s.release)
	return s, nil
}

// session is one client connection of a node.
type session struct {
	n    *Node
	cq   verbs.CQ
	rpc  *rpc.Server
	conn *rpc.ServerConn
	ids  map[uint16]bool // claimed here, under n.mu
}

func idReq(req []byte) (uint16, error) {
	if len(req) != 2 {
		return 0, fmt.Errorf("%w: a %d-byte request", ErrProtocol, len(req))
	}
	return binary.LittleEndian.Uint16(req), nil
}

// claim is MethodClaim.
func (s *session) claim(req, resp []byte) (int, error) {
	id, err := idReq(req)
	if err != nil {
		return 0, err
	}
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if o := s.n.claims[id]; (o != nil && o != s) || s.n.burned[id] {
		return 0, fmt.Errorf("%w: %#x", ErrIDTaken, id)
	}
	s.n.claims[id], s.ids[id] = s, true
	resp[0] = 1
	return 1, nil
}

// release is MethodRelease.
func (s *session) release(req, resp []byte) (int, error) {
	id, err := idReq(req)
	if err != nil {
		return 0, err
	}
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if s.n.claims[id] == s {
		delete(s.n.claims, id)
		delete(s.ids, id)
	}
	resp[0] = 1
	return 1, nil
}

// Options implements memnode.Session.
func (s *session) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: QPCap, Access: verbs.AccessAll, Timeout: ClientTimeout}
}

// Prepare posts the client's RPC receives before it may send.
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
	if s.conn == nil {
		return s.rpc.Serve(ctx, s.n.pd, qp, cq)
	}
	return s.conn.Serve(ctx, cq)
}

// Close implements memnode.Session: ids the client still holds are
// burned — never granted again — since transactions of theirs may be
// left prepared in the table, and their decision records must keep
// meaning what they say (resolve.go).
func (s *session) Close() error {
	s.n.mu.Lock()
	for id := range s.ids {
		if s.n.claims[id] == s {
			delete(s.n.claims, id)
			s.n.burned[id] = true
		}
	}
	s.n.mu.Unlock()
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(err, s.cq.Destroy())
}
