package prismkv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config sizes a PRISM-KV node.
type Config struct {
	// Slots is the number of index slots (default 1<<16): the most keys
	// the node holds at once. A deleted key's slot takes a new key.
	Slots int
	// Memory is the bytes for items (default 128 MiB).
	Memory int
	// Stock is how many bytes of free buffers each size class keeps
	// posted (default 1 MiB: 16,384 buffers of 64 bytes, 8 of 128 KiB,
	// and at least 4 of any class). A PUT that finds its class empty
	// fails its connection (ALLOCATE's remote error), so size it for the
	// bursts between two restocks.
	Stock int
	// Restock is how often the node tops the free lists up and recycles
	// returned items (default 200 µs).
	Restock time.Duration
	// ReturnSlots sizes the ring clients return old items through
	// (default 4096).
	ReturnSlots int
}

func (c *Config) defaults() {
	if c.Slots <= 0 {
		c.Slots = 1 << 16
	}
	if c.Memory <= 0 {
		c.Memory = 128 << 20
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

// Pool classes: items of 64 B to 128 KiB.
const (
	minBuf = 64
	maxBuf = 128 << 10
)

// Server is a PRISM-KV node: all its work is done by clients' one-sided
// operations and its NIC; its CPU only restocks the free lists and
// recycles returned items. An RPC server answers the one call that tells
// clients the layout.
type Server struct {
	cfg    Config
	pd     verbs.PD
	mr     verbs.MR
	pool   *prism.Pool
	ring   *prism.ReturnRing
	rpc    *rpc.Server
	empty  uint64
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
	cpu    atomic.Int64
}

// CPU is the time the node's CPU spent on the store: restocking the free
// lists and recycling returned items (clients' operations cost it
// nothing; its NIC executes them).
func (s *Server) CPU() time.Duration { return time.Duration(s.cpu.Load()) }

// methodInfo answers the layout: region address, rkey, slots, empty item
// address, return ring address and slots, smallest buffer.
const methodInfo = 1

// NewServer lays out a node in a new region of pd and starts its restock
// loop.
func NewServer(pd verbs.PD, cfg Config) (*Server, error) {
	cfg.defaults()
	emptyOff := uint64(cfg.Slots * slotSize)
	emptyOff = (emptyOff + 63) &^ 63
	ringOff := (emptyOff + lockOff + uint64(8*segments(cfg.Slots)) + 63) &^ 63 // after the distance word and the locks
	poolOff := ringOff + uint64(prism.ReturnRingSize(cfg.ReturnSlots))
	poolOff = (poolOff + maxBuf - 1) &^ (maxBuf - 1)
	mr, err := pd.AllocMR(int(poolOff)+cfg.Memory, verbs.AccessAll)
	if err != nil {
		return nil, fmt.Errorf("prismkv: %w", err)
	}
	b := mr.Bytes()
	putItem(b[emptyOff:], nil, nil, flagEmpty)
	putItem(b[emptyOff+freeItemOff:], nil, nil, flagFree)
	empty := mr.Addr() + emptyOff
	for i := 0; i < cfg.Slots; i++ {
		binary.NativeEndian.PutUint64(b[i*slotSize:], empty)
		binary.NativeEndian.PutUint64(b[i*slotSize+8:], itemHead)
	}
	ring, err := prism.NewReturnRing(mr, int(ringOff), cfg.ReturnSlots)
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("prismkv: %w", err)
	}
	pool, err := prism.NewPool(mr, prism.PoolConfig{MinSize: minBuf, MaxSize: maxBuf, Stock: 4, StockBytes: cfg.Stock, Offset: poolOff})
	if err != nil {
		mr.Deregister()
		return nil, fmt.Errorf("prismkv: %w", err)
	}
	s := &Server{cfg: cfg, pd: pd, mr: mr, pool: pool, ring: ring, empty: empty,
		rpc: rpc.NewServer(rpc.ServerConfig{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.rpc.Handle(methodInfo, s.info)
	go s.restock()
	return s, nil
}

func (s *Server) info(req, resp []byte) (int, error) {
	binary.LittleEndian.PutUint64(resp, s.mr.Addr())
	binary.LittleEndian.PutUint32(resp[8:], s.mr.RKey())
	binary.LittleEndian.PutUint32(resp[12:], uint32(s.cfg.Slots))
	binary.LittleEndian.PutUint64(resp[16:], s.empty)
	binary.LittleEndian.PutUint64(resp[24:], s.ring.Addr())
	binary.LittleEndian.PutUint32(resp[32:], uint32(s.ring.Slots()))
	binary.LittleEndian.PutUint32(resp[36:], minBuf)
	return 40, nil
}

// restock keeps the free lists stocked and recycles what clients return.
func (s *Server) restock() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Restock)
	defer t.Stop()
	full := false
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		t0 := time.Now()
		if _, err := s.ring.Drain(s.pool); err != nil {
			slog.Warn("prismkv: return ring", "err", err)
		}
		var err error
		if s.pool.Pending() > 0 {
			_, err = s.pool.Reclaim()
		} else {
			err = s.pool.Restock()
		}
		if errors.Is(err, prism.ErrPoolFull) {
			if !full {
				slog.Warn("prismkv: item memory exhausted; PUTs of new sizes will fail", "memory", s.cfg.Memory)
			}
			full = true
		} else if err != nil {
			slog.Warn("prismkv: restock", "err", err)
		}
		s.cpu.Add(int64(time.Since(t0)))
	}
}

// Serve serves one client connection (qp connected, completions on cq)
// until ctx ends. End ctx and wait for Serve before Close.
func (s *Server) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	return s.rpc.Serve(ctx, s.pd, qp, cq)
}

// Attach posts a client connection's receives on qp (in INIT or later),
// before the client can send; serve it with the returned connection's
// Serve (cq its completions) once it is connected, or Close it.
func (s *Server) Attach(qp verbs.QP) (*rpc.ServerConn, error) {
	return s.rpc.Attach(s.pd, qp)
}

// Stats are the node's item buffer counters.
func (s *Server) Stats() prism.PoolStats { return s.pool.Stats() }

// Close stops the restock loop and releases the region.
func (s *Server) Close() error {
	s.closed.Do(func() { close(s.stop); <-s.done })
	return s.mr.Deregister()
}

// NodeStats counts, by looking at the node's memory, the slots that hold
// a key with a value and the slots free for a new key; Ops counts the
// item buffers clients returned and the node recycled. The slots are read
// while clients change them: the counts are a moment's, not a snapshot.
func (s *Server) NodeStats() kv.NodeStats {
	b := s.mr.Bytes()
	var keys, free int64
	for i := 0; i < s.cfg.Slots; i++ {
		p := atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[i*slotSize])))
		switch fl := s.itemFlags(p); {
		case fl&(flagEmpty|flagFree) != 0:
			free++
		case fl&flagTomb == 0:
			keys++
		}
	}
	st := s.pool.Stats()
	return kv.NodeStats{Keys: keys, Slots: int64(s.cfg.Slots), SlotsFree: free, Memory: int64(s.cfg.Memory), MemoryFree: -1,
		Ops: map[string]uint64{"items_returned": st.Returned, "items_recycled": st.Recycled}}
}

// itemFlags are the flags of the item at address p (0 when p is outside
// the region).
func (s *Server) itemFlags(p uint64) byte {
	off := p - s.mr.Addr()
	if p < s.mr.Addr() || off+itemHead > uint64(s.mr.Len()) {
		return 0
	}
	return s.mr.Bytes()[off+2]
}
