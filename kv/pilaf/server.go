package pilaf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// RPC methods of a Pilaf node.
const (
	methodInfo   = 1
	methodPut    = 2
	methodDelete = 3
)

// maxMessage fits a PUT of the largest key and value.
const maxMessage = rpc.Header + 2 + kv.MaxKey + kv.MaxValue + 64

// Config sizes a Pilaf node.
type Config struct {
	// Buckets is the number of index entries (default 1<<16): the most
	// keys the node holds, deleted ones until their entry is reused.
	Buckets int
	// Memory is the bytes for extents (default 64 MiB).
	Memory int
	// Quarantine is how many freed extents wait before reuse (default
	// 1024), so that a GET that read an old entry rarely finds its
	// extent reused (its CRC would catch it; the GET retries). A node out
	// of memory reuses the oldest of them rather than refuse a PUT.
	Quarantine int
}

func (c *Config) defaults() {
	if c.Buckets <= 0 {
		c.Buckets = 1 << 16
	}
	if c.Memory <= 0 {
		c.Memory = 64 << 20
	}
	if c.Quarantine <= 0 {
		c.Quarantine = 1024
	}
}

// Server is a Pilaf node: an index and extents in one region clients
// READ, and an RPC server whose handlers run PUT and DELETE on the
// node's CPU.
type Server struct {
	cfg   Config
	pd    verbs.PD
	mr    verbs.MR
	rpc   *rpc.Server
	index []byte
	heap  uint64 // offset of the extents in the region

	mu         sync.Mutex
	bump       uint64
	free       [32][]uint64 // freed extents by size class
	quarantine []freed
	qhead      int
	entryBuf   [entrySize]byte
	tear       bool // tests: write entries and extents a few bytes at a time
	cpu        atomic.Int64

	// Counters for NodeStats, under mu.
	keys, puts, dels uint64
	freeBytes        uint64 // in free lists and quarantine
}

// timed counts the time h runs as the node's CPU.
func (s *Server) timed(h rpc.Handler) rpc.Handler {
	return func(req, resp []byte) (int, error) {
		t0 := time.Now()
		n, err := h(req, resp)
		s.cpu.Add(int64(time.Since(t0)))
		return n, err
	}
}

// CPU is the time the node's CPU spent serving PUTs and DELETEs (its
// handlers; GETs cost it nothing: clients READ).
func (s *Server) CPU() time.Duration { return time.Duration(s.cpu.Load()) }

type freed struct {
	off   uint64
	class int
}

// minClass is the smallest extent allocation, 64 bytes.
const minClass = 6

// NewServer lays out a node in a new region of pd.
func NewServer(pd verbs.PD, cfg Config) (*Server, error) {
	cfg.defaults()
	heap := uint64(cfg.Buckets * entrySize)
	heap = (heap + 63) &^ 63
	mr, err := pd.AllocMR(int(heap)+cfg.Memory, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	if err != nil {
		return nil, fmt.Errorf("pilaf: %w", err)
	}
	s := &Server{cfg: cfg, pd: pd, mr: mr, index: mr.Bytes()[:cfg.Buckets*entrySize], heap: heap, bump: heap,
		rpc: rpc.NewServer(rpc.ServerConfig{MaxMessage: maxMessage, Recvs: 32})}
	s.rpc.Handle(methodInfo, s.info)
	s.rpc.Handle(methodPut, s.timed(s.put))
	s.rpc.Handle(methodDelete, s.timed(s.del))
	return s, nil
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

// Close releases the node's region.
func (s *Server) Close() error { return s.mr.Deregister() }

func (s *Server) info(req, resp []byte) (int, error) {
	binary.LittleEndian.PutUint64(resp, s.mr.Addr())
	binary.LittleEndian.PutUint32(resp[8:], s.mr.RKey())
	binary.LittleEndian.PutUint32(resp[12:], uint32(s.cfg.Buckets))
	return 16, nil
}

// lookup finds key: the index of its entry (found), or where to insert it
// (the first tombstone or empty entry of its chain; -1 when the index is
// full). Under s.mu.
func (s *Server) lookup(key []byte, h uint64) (at int, e entry, found bool) {
	n := s.cfg.Buckets
	fp := fingerprint(h)
	at = -1
	for i, b := 0, int(h%uint64(n)); i < n; i, b = i+1, (b+1)%n {
		e, empty, _ := readEntry(s.index[b*entrySize : (b+1)*entrySize]) // the server's own writes are whole
		if empty {
			if at < 0 {
				at = b
			}
			return at, entry{}, false
		}
		if e.tombstone() {
			if at < 0 {
				at = b
			}
			continue
		}
		if e.fp() != fp {
			continue
		}
		k, _, ok := readExtent(s.extent(e))
		if ok && bytes.Equal(k, key) {
			return b, e, true
		}
	}
	return at, entry{}, false
}

func (s *Server) extent(e entry) []byte {
	off := e.addr - s.mr.Addr()
	return s.mr.Bytes()[off : off+uint64(e.length)]
}

func class(n int) int {
	c := bits.Len(uint(n - 1))
	return max(c, minClass)
}

// alloc returns the region offset of a buffer of class c.
func (s *Server) alloc(c int) (uint64, error) {
	size := uint64(1) << c
	if l := s.free[c]; len(l) > 0 {
		off := l[len(l)-1]
		s.free[c] = l[:len(l)-1]
		s.freeBytes -= size
		return off, nil
	}
	if s.bump+size <= uint64(s.mr.Len()) {
		off := s.bump
		s.bump += size
		return off, nil
	}
	// Out of memory: take the oldest quarantined extent of the class
	// rather than fail. A GET that still reads it finds its CRC wrong
	// and reads again: the quarantine only makes that rare.
	q := append(s.quarantine[s.qhead:len(s.quarantine):len(s.quarantine)], s.quarantine[:s.qhead]...) // oldest first
	for j, f := range q {
		if f.class == c {
			s.quarantine, s.qhead = append(q[:j], q[j+1:]...), 0
			s.freeBytes -= size
			return f.off, nil
		}
	}
	return 0, kv.ErrFull
}

// release puts an extent in quarantine; the oldest one leaves it for its
// free list.
func (s *Server) release(e entry) {
	f := freed{off: e.addr - s.mr.Addr(), class: class(int(e.length))}
	s.freeBytes += 1 << f.class
	if len(s.quarantine) < s.cfg.Quarantine {
		s.quarantine = append(s.quarantine, f)
		return
	}
	old := s.quarantine[s.qhead]
	s.quarantine[s.qhead] = f
	s.qhead = (s.qhead + 1) % len(s.quarantine)
	s.free[old.class] = append(s.free[old.class], old.off)
}

func (s *Server) writeEntry(at int, e entry) {
	putEntry(s.entryBuf[:], e)
	s.write(s.index[at*entrySize:], s.entryBuf[:]) // readers may see it torn: its CRC tells them
}

// write copies src into the region at dst (torn on purpose in tests).
func (s *Server) write(dst, src []byte) {
	if !s.tear {
		copy(dst, src)
		return
	}
	for i := 0; i < len(src); i += 4 {
		copy(dst[i:], src[i:min(i+4, len(src))])
		runtime.Gosched()
	}
}

// put: u16 key length | key | value.
func (s *Server) put(req, resp []byte) (int, error) {
	if len(req) < 2 {
		return 0, errors.New("short put")
	}
	kl := int(binary.LittleEndian.Uint16(req))
	if 2+kl > len(req) {
		return 0, errors.New("short put")
	}
	key, value := req[2:2+kl], req[2+kl:]
	if err := kv.Check(key, value); err != nil {
		return 0, err
	}
	h := kv.Hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	at, old, found := s.lookup(key, h)
	if at < 0 {
		return 0, fmt.Errorf("%w: index of %d entries", kv.ErrFull, s.cfg.Buckets)
	}
	n := extentLen(len(key), len(value))
	off, err := s.alloc(class(n))
	if err != nil {
		return 0, err
	}
	ext := s.mr.Bytes()[off : off+uint64(n)]
	if s.tear {
		tmp := make([]byte, n)
		putExtent(tmp, key, value)
		s.write(ext, tmp)
	} else {
		putExtent(ext, key, value)
	}
	s.writeEntry(at, entry{addr: s.mr.Addr() + off, length: uint32(n), meta: metaValid | fingerprint(h), extCRC: crc(ext)})
	s.puts++
	if found {
		s.release(old)
	} else {
		s.keys++
	}
	return 0, nil
}

// del: key.
func (s *Server) del(req, resp []byte) (int, error) {
	if err := kv.Check(req, nil); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, old, found := s.lookup(req, kv.Hash(req))
	if !found {
		return 0, nil
	}
	s.writeEntry(at, entry{meta: metaTomb})
	s.release(old)
	s.keys--
	s.dels++
	return 0, nil
}

// NodeStats are the node's counters: every write passes its CPU, so they
// are exact.
func (s *Server) NodeStats() kv.NodeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return kv.NodeStats{Keys: int64(s.keys), Slots: int64(s.cfg.Buckets), SlotsFree: int64(s.cfg.Buckets) - int64(s.keys),
		Memory: int64(s.cfg.Memory), MemoryFree: int64(uint64(s.mr.Len())-s.bump) + int64(s.freeBytes),
		Ops: map[string]uint64{"put": s.puts, "delete": s.dels}}
}
