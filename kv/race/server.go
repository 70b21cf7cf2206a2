package race

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config sizes a RACE node.
type Config struct {
	// Depth is the initial global depth: 1<<Depth subtables (default 2).
	Depth int
	// Memory is the bytes for subtables and blocks (default 256 MiB).
	Memory int
}

// RPC methods: the layout, memory for subtables and block chunks, and
// memory given back.
const (
	methodInfo  = 1
	methodAlloc = 2
	methodFree  = 3
)

// Server is a RACE node: all operations on its hash table are clients'
// one-sided READs, WRITEs and CASes; its CPU only hands out memory.
type Server struct {
	cfg  Config
	pd   verbs.PD
	mr   verbs.MR
	heap uint64
	mu   sync.Mutex
	bump uint64
	cpu  atomic.Int64

	allocs uint64 // memory RPCs served, under mu
	frees  uint64 // ranges given back, under mu
	ext    extents
	held   []held // given back, in quarantine, oldest first
}

// CPU is the time the node's CPU spent on the store: handing out memory
// (every table operation is a client's one-sided operation).
func (s *Server) CPU() time.Duration { return time.Duration(s.cpu.Load()) }

// NewServer lays out a node in a new region of pd: the directory and its
// first subtables.
func NewServer(pd verbs.PD, cfg Config) (*Server, error) {
	if cfg.Depth <= 0 {
		cfg.Depth = 2
	}
	if cfg.Depth > MaxDepth {
		return nil, fmt.Errorf("%w: depth %d (at most %d)", verbs.ErrInvalidArg, cfg.Depth, MaxDepth)
	}
	if cfg.Memory <= 0 {
		cfg.Memory = 256 << 20
	}
	heap := uint64(dirOff + 8<<MaxDepth)
	mr, err := pd.AllocMR(int(heap)+cfg.Memory, verbs.AccessAll)
	if err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	s := &Server{cfg: cfg, pd: pd, mr: mr, heap: heap, bump: heap}
	b := mr.Bytes()
	binary.NativeEndian.PutUint64(b, uint64(cfg.Depth))
	for i := uint64(0); i < 1<<cfg.Depth; i++ {
		off, err := s.alloc(subtableSize)
		if err != nil {
			mr.Deregister()
			return nil, err
		}
		binary.NativeEndian.PutUint64(b[off:], mkCtl(uint(cfg.Depth), i, false))
		binary.NativeEndian.PutUint64(b[dirOff+8*i:], mkDir(mr.Addr()+off, uint(cfg.Depth), 0))
	}
	return s, nil
}

// conn is the RPC server of one client connection: its own, so that the
// node knows which memory the client holds (owner).
func (s *Server) conn() *rpc.Server {
	o := &owner{}
	r := rpc.NewServer(rpc.ServerConfig{})
	r.Handle(methodInfo, s.info)
	r.Handle(methodAlloc, func(req, resp []byte) (int, error) {
		t0 := time.Now()
		n, err := s.allocRPC(o, req, resp)
		s.cpu.Add(int64(time.Since(t0)))
		return n, err
	})
	r.Handle(methodFree, func(req, resp []byte) (int, error) {
		t0 := time.Now()
		n, err := s.freeRPC(o, req, resp)
		s.cpu.Add(int64(time.Since(t0)))
		return n, err
	})
	return r
}

// alloc hands out n bytes of zeroed memory. When only memory still in
// quarantine would fit, it waits for that quarantine to end (at most
// quarantineTime) rather than calling the node full: clients that come
// and go faster than the quarantine would otherwise exhaust a node whose
// memory is all given back.
func (s *Server) alloc(n int) (uint64, error) {
	deadline := time.Now().Add(quarantineTime)
	for {
		off, wait, err := s.tryAlloc(n)
		if err == nil || wait <= 0 || time.Now().Add(wait).After(deadline.Add(time.Millisecond)) {
			return off, err
		}
		time.Sleep(wait)
	}
}

// tryAlloc is one attempt of alloc; when it fails while memory waits in
// quarantine, wait is how long until the oldest of it is free.
func (s *Server) tryAlloc(n int) (off uint64, wait time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.release(now)
	if off, ok := s.ext.fit(uint64(n)); ok {
		s.ext.remove(off, uint64(n))
		clear(s.mr.Bytes()[off : off+uint64(n)]) // handed out zeroed, as from bump
		return off, 0, nil
	}
	off = (s.bump + 63) &^ 63
	if off+uint64(n) > uint64(s.mr.Len()) {
		if len(s.held) > 0 {
			wait = max(s.held[0].at.Add(quarantineTime).Sub(now), time.Millisecond)
		}
		return 0, wait, fmt.Errorf("%w: %d bytes of memory used", kv.ErrFull, s.bump-s.heap)
	}
	s.bump = off + uint64(n)
	return off, 0, nil
}

func (s *Server) info(req, resp []byte) (int, error) {
	binary.LittleEndian.PutUint64(resp, s.mr.Addr())
	binary.LittleEndian.PutUint32(resp[8:], s.mr.RKey())
	return 12, nil
}

// allocRPC: u32 size → u64 address of zeroed memory, which o then holds.
func (s *Server) allocRPC(o *owner, req, resp []byte) (int, error) {
	if len(req) != 4 {
		return 0, errors.New("race: alloc takes a u32 size")
	}
	n := int(binary.LittleEndian.Uint32(req))
	if n <= 0 || n > 64<<20 {
		return 0, fmt.Errorf("race: alloc of %d bytes", n)
	}
	off, err := s.alloc(n)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.allocs++
	o.held.add(off, uint64(n))
	s.mu.Unlock()
	binary.LittleEndian.PutUint64(resp, s.mr.Addr()+off)
	return 8, nil
}

// Serve serves one client connection until ctx ends. End ctx and wait
// for Serve before Close.
func (s *Server) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	return s.conn().Serve(ctx, s.pd, qp, cq)
}

// Attach posts a client connection's receives on qp (in INIT or later),
// before the client can send; serve it with the returned connection's
// Serve (cq its completions) once it is connected, or Close it.
func (s *Server) Attach(qp verbs.QP) (*rpc.ServerConn, error) {
	return s.conn().Attach(s.pd, qp)
}

// Depth is the node's current global depth (directory doublings show
// here).
func (s *Server) Depth() int { return int(binary.NativeEndian.Uint64(s.mr.Bytes())) }

// Subtables counts the distinct subtables the directory points to.
func (s *Server) Subtables() int {
	b := s.mr.Bytes()
	d := s.Depth()
	seen := map[uint64]bool{}
	for i := 0; i < 1<<d; i++ {
		seen[dirAddr(binary.NativeEndian.Uint64(b[dirOff+8*i:]))] = true
	}
	return len(seen)
}

// Close releases the region.
func (s *Server) Close() error { return s.mr.Deregister() }

// NodeStats: the block and subtable memory not handed out (given-back
// memory in quarantine included), and the memory RPCs served. Keys live in slots clients change one-sidedly; the
// node does not count them.
func (s *Server) NodeStats() kv.NodeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(time.Now())
	free := uint64(s.mr.Len()) - s.bump + s.ext.bytes
	for _, h := range s.held {
		free += h.n
	}
	return kv.NodeStats{Keys: -1, Slots: -1, SlotsFree: -1, Memory: int64(s.cfg.Memory),
		MemoryFree: int64(free), Ops: map[string]uint64{"alloc": s.allocs, "free": s.frees}}
}
