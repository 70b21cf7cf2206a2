package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Name is the service a replica serves (memnode.Hello.Service).
const Name = "blockstore"

// Config sizes a replica.
type Config struct {
	// MaxBlockSize is the largest block size a volume may have here
	// (default blockstore.MaxBlockSize); it sizes every connection's RPC
	// receives.
	MaxBlockSize int
	// MaxMemory bounds the memory a volume takes (default 1 GiB):
	// creating a larger one fails with blockstore.ErrOutOfRange.
	MaxMemory int64
	// Spare is how many buffers beyond one per block the region holds
	// (default 4096): the free list's stock and the replaced buffers on
	// their way back, so at least Stock plus each writing client's
	// return batch (prismrs.Config.ReturnBatch, 32) plus the writes in
	// flight. When every buffer is taken a write's ALLOCATE is refused
	// like a receiver-not-ready, retried, and then fails its client's
	// connection (which the client dials again).
	Spare int
	// Stock is how many free buffers the node keeps posted (default 256).
	Stock int
	// Restock is how often the free list is topped up and returned
	// buffers recycled (default 200 µs).
	Restock time.Duration
	// ReturnSlots sizes the return ring (default 4096).
	ReturnSlots int
	// Recvs is the RPC receives posted per connection (default 16);
	// clients keep at most that many calls in flight.
	Recvs int
	// Join, when not nil, makes the replica rejoin a volume that exists
	// on the others (it restarted empty): it answers as a member only
	// once it has copied every block from them (join.go).
	Join *JoinConfig
}

func (c *Config) defaults() {
	if c.MaxBlockSize <= 0 || c.MaxBlockSize > blockstore.MaxBlockSize {
		c.MaxBlockSize = blockstore.MaxBlockSize
	}
	if c.MaxMemory <= 0 {
		c.MaxMemory = 1 << 30
	}
	if c.Spare <= 0 {
		c.Spare = 4096
	}
	if c.Stock <= 0 {
		c.Stock = 256
	}
	if c.Restock <= 0 {
		c.Restock = 200 * time.Microsecond
	}
	if c.ReturnSlots <= 0 {
		c.ReturnSlots = 4096
	}
	if c.Recvs <= 0 {
		c.Recvs = 16
	}
}

// MaxMessage is the RPC message size of a replica that takes blocks of
// up to maxBlock bytes: MethodWrite's request, header included.
func MaxMessage(maxBlock int) int { return rpc.Header + 16 + maxBlock }

// QPCap is the queue sizes of a client's connection (both ends).
var QPCap = verbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 64, MaxInlineData: verbs.DefaultMaxInlineData}

// Timeouts of clients' connections: a replica that answers nothing for
// this long × (retries+1) costs its clients their connection to it. An
// ALLOCATE that finds the free list empty (or a call that finds no
// receive posted) is retried MinRNR apart for as long as it takes
// (InfiniteRNRRetry): the replica is then slow, not gone — an operation
// returns with the other replicas of its majority, and the request waits
// on one of its slots until the replica's CPU restocks. With a bounded
// budget (6 × 5 ms), a replica whose CPU was off the cores for 30 ms
// cost every client its connection, and with all replicas in one
// starved process (tests under load) every write failed.
const (
	ClientTimeout  = 250 * time.Millisecond
	ClientMinRNR   = 5 * time.Millisecond
	ClientRNRRetry = verbs.InfiniteRNRRetry
)

// DialOptions are the cm options of a client's connection to a replica:
// a QP in pd whose completions go to cq, QPCap queues, full access, the
// RNR pacing a write's ALLOCATE needs when the free list is momentarily
// empty, retry timeout timeout (ClientTimeout when 0), and the Hello
// asking for the block store with token.
func DialOptions(pd verbs.PD, cq verbs.CQ, token string, timeout time.Duration) cm.Options {
	if timeout <= 0 {
		timeout = ClientTimeout
	}
	return cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: QPCap, Access: verbs.AccessAll,
		MinRNRTimer: ClientMinRNR, RNRRetry: ClientRNRRetry, Timeout: timeout,
		PrivateData: memnode.Hello{Service: Name, Token: token}.Marshal()}
}

// Replica is one replica of one volume as a memnode.Service: the
// memory node serves its connections (handshake, token, liveness,
// release), and the replica answers its RPCs and holds the volume.
type Replica struct {
	cfg Config
	dev verbs.Device
	pd  verbs.PD
	cpu atomic.Int64

	// Counters: calls by method, time in handlers.
	calls    [len(methodNames)]atomic.Uint64
	rpcNanos atomic.Int64

	mu     sync.Mutex
	vol    atomic.Pointer[volume]
	claims map[uint32]*session

	// Recovery (Config.Join): recovering until the copy is done, when
	// joined closes; stopJoin ends it, joinDone closes when it has.
	recovering atomic.Bool
	joined     chan struct{}
	stopJoin   context.CancelFunc
	joinDone   chan struct{}
}

var _ memnode.MetricsService = (*Replica)(nil)

// Service returns the memnode.NewServiceFunc of a replica configured by
// cfg; pass it as memnode.Config.NewService. made, when not nil,
// receives the Replica (for its CPU and stats).
func Service(cfg Config, made func(*Replica)) memnode.NewServiceFunc {
	return func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
		cfg.defaults()
		r := &Replica{cfg: cfg, dev: dev, pd: pd, claims: map[uint32]*session{}, joined: make(chan struct{})}
		if cfg.Join == nil {
			close(r.joined)
		} else if err := r.startJoin(*cfg.Join); err != nil {
			return nil, err
		}
		if made != nil {
			made(r)
		}
		return r, nil
	}
}

// CPU is the time the replica's CPU spent on the PRISM-RS data path's
// upkeep: restocking the free list and recycling returned buffers. The
// RPC methods' time is not in it.
func (r *Replica) CPU() time.Duration { return time.Duration(r.cpu.Load()) }

// Stats are the volume's buffer counters (zero before a volume exists).
func (r *Replica) Stats() prism.PoolStats {
	if v := r.vol.Load(); v != nil {
		return v.pool.Stats()
	}
	return prism.PoolStats{}
}

// Name implements memnode.Service.
func (r *Replica) Name() string { return Name }

// Admit implements memnode.Service: the clients of the block store.
func (r *Replica) Admit(service string) error { return memnode.AdmitOnly(Name, service) }

// Describe implements memnode.Service: the volume travels by RPC.
func (r *Replica) Describe(*memnode.Info) {}

// Close implements memnode.Service: it stops a recovery still running
// and releases the volume.
func (r *Replica) Close() error {
	if r.stopJoin != nil {
		r.stopJoin()
		<-r.joinDone
	}
	if v := r.vol.Load(); v != nil {
		return v.close()
	}
	return nil
}

// create is MethodCreate.
func (r *Replica) create(req, resp []byte) (int, error) {
	defer r.count(MethodCreate, time.Now())
	if r.recovering.Load() {
		return 0, ErrRecovering
	}
	l, err := UnmarshalLayout(req)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.vol.Load()
	if v == nil {
		if v, err = newVolume(r.pd, l, r.cfg, &r.cpu); err != nil {
			return 0, err
		}
		r.vol.Store(v)
	} else if !v.info.Layout.Equal(l) {
		return 0, fmt.Errorf("%w: %d blocks of %d bytes on %v", ErrExists, v.info.Layout.Blocks, v.info.Layout.BlockSize, v.info.Layout.Replicas)
	}
	return putInfo(v.info, resp)
}

func putInfo(in Info, resp []byte) (int, error) {
	b, err := in.Marshal()
	if err != nil {
		return 0, err
	}
	return copy(resp, b), nil
}

// volume returns the volume, or ErrNoVolume.
func (r *Replica) volume() (*volume, error) {
	if v := r.vol.Load(); v != nil {
		return v, nil
	}
	return nil, blockstore.ErrNoVolume
}

// member returns the volume of a replica that is a member of it: not
// while it recovers (ErrRecovering), nor before a volume exists
// (ErrNoVolume).
func (r *Replica) member() (*volume, error) {
	if r.recovering.Load() {
		return nil, ErrRecovering
	}
	return r.volume()
}

// info is MethodInfo.
func (r *Replica) info(_, resp []byte) (int, error) {
	defer r.count(MethodInfo, time.Now())
	v, err := r.member()
	if err != nil {
		return 0, err
	}
	return putInfo(v.info, resp)
}

// claim is MethodClaim for session s.
func (r *Replica) claim(s *session, req, resp []byte) (int, error) {
	defer r.count(MethodClaim, time.Now())
	if len(req) != 4 {
		return 0, fmt.Errorf("%w: a %d-byte claim", blockstore.ErrProtocol, len(req))
	}
	id := binary.LittleEndian.Uint32(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.claims[id]; o != nil && o != s {
		return 0, fmt.Errorf("%w: %#x", ErrIDTaken, id)
	}
	if s.claimed && r.claims[s.id] == s {
		delete(r.claims, s.id)
	}
	r.claims[id], s.id, s.claimed = s, id, true
	resp[0] = 1
	return 1, nil
}

// release drops s's claim.
func (r *Replica) release(s *session) {
	r.mu.Lock()
	if s.claimed && r.claims[s.id] == s {
		delete(r.claims, s.id)
	}
	r.mu.Unlock()
}

// blockReq decodes a request that starts with a block id.
func blockReq(req []byte, n int) (uint64, error) {
	if len(req) < n {
		return 0, fmt.Errorf("%w: a %d-byte request", blockstore.ErrProtocol, len(req))
	}
	return binary.LittleEndian.Uint64(req), nil
}

// memberBlock is the volume, if this replica is a member, and the block
// id a MethodReadTag or MethodRead request names.
func (r *Replica) memberBlock(req []byte) (*volume, uint64, error) {
	v, err := r.member()
	if err != nil {
		return nil, 0, err
	}
	id, err := blockReq(req, 8)
	return v, id, err
}

// readTag is MethodReadTag.
func (r *Replica) readTag(req, resp []byte) (int, error) {
	defer r.count(MethodReadTag, time.Now())
	v, id, err := r.memberBlock(req)
	if err != nil {
		return 0, err
	}
	return v.readTag(id, resp)
}

// read is MethodRead.
func (r *Replica) read(req, resp []byte) (int, error) {
	defer r.count(MethodRead, time.Now())
	v, id, err := r.memberBlock(req)
	if err != nil {
		return 0, err
	}
	return v.read(id, resp)
}

// write is MethodWrite.
func (r *Replica) write(req, resp []byte) (int, error) {
	defer r.count(MethodWrite, time.Now())
	v, err := r.volume()
	if err != nil {
		return 0, err
	}
	id, err := blockReq(req, 16)
	if err != nil {
		return 0, err
	}
	return v.write(id, Tag(binary.LittleEndian.Uint64(req[8:])), req[16:], resp)
}

// clientCQ is the depth of a client's CQ at the replica.
const clientCQ = 1024

// Open implements memnode.Service: a client's CQ and its RPC server,
// which waits for calls parked (verbs.PollEvent): a replica serves many
// connections, and their pollers spinning would take its cores.
func (r *Replica) Open() (memnode.Session, error) {
	cq, err := r.dev.CreateCQ(clientCQ)
	if err != nil {
		return nil, err
	}
	s := &session{r: r, cq: cq,
		rpc: rpc.NewServer(rpc.ServerConfig{MaxMessage: MaxMessage(r.cfg.MaxBlockSize), Recvs: r.cfg.Recvs, Poll: verbs.PollEvent})}
	s.rpc.Handle(MethodInfo, r.info)
	s.rpc.Handle(MethodCreate, r.create)
	s.rpc.Handle(MethodClaim, func(req, resp []byte) (int, error) { return r.claim(s, req, resp) })
	s.rpc.Handle(MethodReadTag, r.readTag)
	s.rpc.Handle(MethodRead, r.read)
	s.rpc.Handle(MethodWrite, r.write)
	return s, nil
}

// count counts a call of method that began at t0 (deferred by every
// handler).
func (r *Replica) count(method uint16, t0 time.Time) {
	r.rpcNanos.Add(int64(time.Since(t0)))
	r.calls[method].Add(1)
}

// session is one client connection of a replica.
type session struct {
	r       *Replica
	cq      verbs.CQ
	rpc     *rpc.Server
	conn    *rpc.ServerConn // once prepared
	id      uint32          // the claimed client id, under r.mu
	claimed bool
}

// Options implements memnode.Session.
func (s *session) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: QPCap, Access: verbs.AccessAll, Timeout: ClientTimeout}
}

// Prepare posts the client's RPC receives before it may send.
func (s *session) Prepare(qp verbs.QP) error {
	c, err := s.rpc.Attach(s.r.pd, qp)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

// Serve implements memnode.Session.
func (s *session) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	if s.conn == nil {
		return s.rpc.Serve(ctx, s.r.pd, qp, cq)
	}
	return s.conn.Serve(ctx, cq)
}

// Close implements memnode.Session: the client's id claim ends with it.
func (s *session) Close() error {
	s.r.release(s)
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(err, s.cq.Destroy())
}
