package prism

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// PoolConfig configures a Pool.
type PoolConfig struct {
	// MinSize and MaxSize bound the size classes, powers of two (defaults
	// 64 B and 64 KiB). Class k holds buffers of MinSize<<k bytes; its free
	// list is queue k of the region.
	MinSize, MaxSize uint32
	// Stock is how many free buffers the pool keeps posted per class while
	// it has room (default 64).
	Stock int
	// StockBytes, when set, raises each class's stock to StockBytes
	// divided by the class's buffer size: thousands of small buffers, a
	// few large ones, for the same memory.
	StockBytes int
	// Offset is where the pool's buffers start in the region: the bytes
	// before it are the caller's (slots, tables), in the same region so
	// that indirect operations can follow pointers from them.
	Offset uint64
}

// ErrPoolFull is returned when the region has no room for more buffers of
// a class.
var ErrPoolFull = errors.New("prism: pool region exhausted")

// Pool is a server-side PRISM allocator over one region (see the package
// documentation). Its methods are safe for concurrent use.
type Pool struct {
	mr      verbs.MR
	fl      verbs.FreeLists
	min     uint32
	classes int
	stock   int
	stockB  int

	mu      sync.Mutex
	carve   uint64     // offset of the region's first never-used byte
	base    uint64     // offset of the pool's first byte
	pending [][]uint64 // returned buffers per class, awaiting quiescence
	stats   PoolStats
}

// PoolStats counts a pool's buffers.
type PoolStats struct {
	Carved   uint64 // buffers cut from the region
	Returned uint64 // buffers given back (Free)
	Recycled uint64 // returned buffers posted again after quiescence
}

// NewPool makes a pool of the whole region mr, whose provider must
// implement ALLOCATE (verbs.FreeLists), and stocks every class.
func NewPool(mr verbs.MR, c PoolConfig) (*Pool, error) {
	fl, ok := mr.(verbs.FreeLists)
	if !ok {
		return nil, fmt.Errorf("%w: %T has no free lists (ALLOCATE)", verbs.ErrNotSupported, mr)
	}
	if c.MinSize == 0 {
		c.MinSize = 64
	}
	if c.MaxSize == 0 {
		c.MaxSize = 64 << 10
	}
	if c.Stock <= 0 {
		c.Stock = 64
	}
	if c.MinSize&(c.MinSize-1) != 0 || c.MaxSize&(c.MaxSize-1) != 0 || c.MinSize < 8 || c.MaxSize < c.MinSize {
		return nil, fmt.Errorf("%w: size classes %d…%d must be powers of two from 8 up", verbs.ErrInvalidArg, c.MinSize, c.MaxSize)
	}
	n := bits.Len32(c.MaxSize) - bits.Len32(c.MinSize) + 1
	if c.Offset > uint64(mr.Len()) {
		return nil, fmt.Errorf("%w: pool offset %d past the %d-byte region", verbs.ErrInvalidArg, c.Offset, mr.Len())
	}
	p := &Pool{mr: mr, fl: fl, min: c.MinSize, classes: n, stock: c.Stock, pending: make([][]uint64, n), carve: c.Offset, base: c.Offset, stockB: c.StockBytes}
	for k := 0; k < n; k++ {
		if err := p.restock(k); err != nil && !errors.Is(err, ErrPoolFull) {
			return nil, err
		}
	}
	return p, nil
}

// Class returns the size class (the free-list queue) for an n-byte item
// and the class's buffer size; ok is false when n exceeds the largest.
func (p *Pool) Class(n int) (queue uint32, size uint32, ok bool) {
	if n <= 0 {
		n = 1
	}
	for k := 0; k < p.classes; k++ {
		if s := p.min << k; uint64(n) <= uint64(s) {
			return uint32(k), s, true
		}
	}
	return 0, 0, false
}

// Size returns the buffer size of class queue.
func (p *Pool) Size(queue uint32) uint32 { return p.min << queue }

// restock posts fresh buffers of class k up to the stock level.
func (p *Pool) restock(k int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restockLocked(k)
}

func (p *Pool) restockLocked(k int) error {
	size := uint64(p.min) << k
	missing := max(p.stock, p.stockB/int(size)) - p.fl.FreeLen(uint32(k))
	var addrs []uint64
	for ; missing > 0; missing-- {
		off := (p.carve + size - 1) / size * size // aligned to its size
		if off+size > uint64(p.mr.Len()) {
			break
		}
		addrs = append(addrs, p.mr.Addr()+off)
		p.carve = off + size
		p.stats.Carved++
	}
	if len(addrs) > 0 {
		if err := p.fl.PostFree(uint32(k), uint32(size), addrs...); err != nil {
			return err
		}
	}
	if missing > 0 {
		return ErrPoolFull
	}
	return nil
}

// Free gives back buffers no pointer reaches any more (the old item of a
// replaced slot, the buffer of a PUT that lost its race). They rejoin
// their free lists at the next Reclaim, after every operation in flight
// on the region has finished.
func (p *Pool) Free(queue uint32, addrs ...uint64) error {
	if int(queue) >= p.classes {
		return fmt.Errorf("%w: class %d of %d", verbs.ErrInvalidArg, queue, p.classes)
	}
	size := uint64(p.Size(queue))
	for _, a := range addrs {
		if a < p.mr.Addr()+p.base || a+size > p.mr.Addr()+uint64(p.mr.Len()) || (a-p.mr.Addr())%size != 0 {
			return fmt.Errorf("%w: %#x is not a %d-byte buffer of the pool", verbs.ErrInvalidArg, a, size)
		}
	}
	p.mu.Lock()
	p.pending[queue] = append(p.pending[queue], addrs...)
	p.stats.Returned += uint64(len(addrs))
	p.mu.Unlock()
	return nil
}

// Reclaim waits until no operation that began before it is still running
// on the region, then posts every buffer freed before the call back to
// its free list, and tops the lists up with fresh buffers. Call it
// periodically or when a list runs low; it returns how many buffers it
// recycled.
func (p *Pool) Reclaim() (int, error) {
	p.mu.Lock()
	batch := p.pending
	p.pending = make([][]uint64, p.classes)
	p.mu.Unlock()
	n := 0
	for _, b := range batch {
		n += len(b)
	}
	if n > 0 {
		p.fl.Quiesce() // nothing that could still read an old buffer is running
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for k, b := range batch {
		if len(b) > 0 {
			if e := p.fl.PostFree(uint32(k), uint32(p.min)<<k, b...); e != nil && err == nil {
				err = e
			}
			p.stats.Recycled += uint64(len(b))
		}
		if e := p.restockLocked(k); e != nil && !errors.Is(e, ErrPoolFull) && err == nil {
			err = e
		}
	}
	return n, err
}

// Restock tops every class's free list up to the stock level without
// waiting for quiescence (no recycled buffers): cheap enough to call
// often. It reports ErrPoolFull when the region has no room left.
func (p *Pool) Restock() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for k := 0; k < p.classes; k++ {
		if e := p.restockLocked(k); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// Pending is how many freed buffers wait for the next Reclaim.
func (p *Pool) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.pending {
		n += len(b)
	}
	return n
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Take carves a fresh buffer of class queue for the region owner's own
// use — one its CPU fills and installs itself, while no peer can reach
// the region yet — and returns its address; ErrPoolFull when the region
// has no room left. It goes back through Free like any other buffer once
// no pointer reaches it.
func (p *Pool) Take(queue uint32) (uint64, error) {
	if int(queue) >= p.classes {
		return 0, fmt.Errorf("%w: class %d of %d", verbs.ErrInvalidArg, queue, p.classes)
	}
	size := uint64(p.min) << queue
	p.mu.Lock()
	defer p.mu.Unlock()
	off := (p.carve + size - 1) / size * size
	if off+size > uint64(p.mr.Len()) {
		return 0, ErrPoolFull
	}
	p.carve = off + size
	p.stats.Carved++
	return p.mr.Addr() + off, nil
}
