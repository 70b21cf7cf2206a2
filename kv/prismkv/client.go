package prismkv

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Poll is how the client's completion poller waits (default
	// adaptive).
	Poll verbs.PollPolicy
	// Slots is the number of operations in flight at once (default 16).
	// The QP needs room for about 5×Slots send requests.
	Slots int
	// CacheKeys sizes the slot cache: that many buckets, rounded up to a
	// power of two, one key each (default 1<<16; negative turns it off).
	CacheKeys int
	// ReturnBatch is how many replaced items the client gathers before
	// returning them to the node in one batch (default 32).
	ReturnBatch int
	// SlotConns, when set, are connections of the client's slots, one
	// slot each (Slots is then their number): a slot's request lists go on
	// its own QP, and its caller polls its own CQ. Over shm a GET then
	// completes on its task's goroutine, without the poller's hand-off.
	// The client owns them from then on (Close closes them); the client's
	// own connection still carries its RPCs.
	SlotConns []SlotConn
}

// SlotConn is a client slot's own connection to the node
// (ClientConfig.SlotConns): a connected RC QP that only the slot posts on,
// whose completions alone go to CQ (both may be SingleThreaded), and
// Close, which releases them.
type SlotConn = remote.SlotConn

// Client is a PRISM-KV store client. GET is one bounded indirect READ
// through the key's slot (linear probing on collision); PUT looks the
// slot up (or takes it from the slot cache) and installs the new item
// with one ALLOCATE → WRITE → key check → CONDITIONAL CAS chain; DELETE
// frees the slot the same way (a new key may take it). Replaced items go back to the node in batches
// through its return ring. It implements kv.Store.
type Client struct {
	cfg     ClientConfig
	rpc     *rpc.Client
	ops     remote.Poster
	base    uint64
	rkey    uint32
	nslots  int
	empty   uint64 // the empty item: unused slots point to it
	free    uint64 // the free item: slots of deleted keys point to it
	locks   uint64 // the segments' lock words
	dist    uint64 // the node's farthest-distance word
	id      uint64 // this client's part of its lock tokens
	seq     atomic.Uint32
	ring    uint64
	ringN   int
	minBuf  uint32
	closed  atomic.Bool
	once    sync.Once
	life    sync.RWMutex
	hits    atomic.Uint64
	lookups atomic.Uint64
	// takeovers counts segment locks taken over from a holder that kept
	// one for leaseTime.
	takeovers atomic.Uint64

	cache *slotCache

	rmu     sync.Mutex
	returns []prism.Returned
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// cached is a key's slot and the slot's value as last seen.
type cached struct {
	slot int
	ptr  uint64
	n    uint64
}

var _ kv.Store = (*Client)(nil)

// Layout of an operation's buffer.
const (
	offSlot    = 0  // a slot's 16 bytes
	offCAS     = 16 // the CAS's previous value, 16 bytes
	offScratch = 32 // the allocated buffer's address, read back
	offRing    = 40 // return ring tail
	offLock    = 48 // a lock word's previous values: lock or test, unlock
	offItem    = 64 // an item read
	itemRoom   = (maxItem + 63) &^ 63
	offNew     = offItem + itemRoom // the item a PUT writes
	offCheck   = offNew + itemRoom  // the key check's 32 bytes of the item
	offDist    = offCheck + 32      // the node's distance word, read; its max, raised
	offPairs   = offDist + 64       // slot values read in bulk
	bulkSlots  = 64
	opBuf      = offPairs + bulkSlots*slotSize
)

// NewClient starts a client on qp, connected to a node's Serve, with
// completions on cq; pd registers its buffers.
func NewClient(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ, cfg ClientConfig) (*Client, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	if cfg.CacheKeys == 0 {
		cfg.CacheKeys = 1 << 16
	}
	if cfg.ReturnBatch <= 0 {
		cfg.ReturnBatch = 32
	}
	if len(cfg.SlotConns) > 0 {
		cfg.Slots = len(cfg.SlotConns)
	}
	c := &Client{cfg: cfg, cache: newSlotCache(cfg.CacheKeys), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
	if err != nil {
		remote.CloseSlotConns(cfg.SlotConns)
		return nil, fmt.Errorf("prismkv: %w", err)
	}
	var ops remote.Poster
	if len(cfg.SlotConns) > 0 {
		ops, err = remote.NewSolo(pd, cfg.SlotConns, opBuf, cfg.Poll, rc)
	} else {
		ops, err = remote.New(pd, qp, cfg.Slots, opBuf, rc)
	}
	if err != nil {
		remote.CloseSlotConns(cfg.SlotConns)
		rc.Close()
		return nil, fmt.Errorf("prismkv: %w", err)
	}
	c.rpc, c.ops = rc, ops
	var info [40]byte
	if n, err := rc.Call(ctx, methodInfo, nil, info[:]); err != nil || n != len(info) {
		close(c.done)
		c.Close()
		return nil, fmt.Errorf("prismkv: node info (%d bytes): %w", n, c.mapErr(err))
	}
	c.base, c.rkey, c.nslots = binary.LittleEndian.Uint64(info[:]), binary.LittleEndian.Uint32(info[8:]), int(binary.LittleEndian.Uint32(info[12:]))
	c.empty, c.ring, c.ringN = binary.LittleEndian.Uint64(info[16:]), binary.LittleEndian.Uint64(info[24:]), int(binary.LittleEndian.Uint32(info[32:]))
	c.minBuf = binary.LittleEndian.Uint32(info[36:])
	c.free, c.locks, c.dist = c.empty+freeItemOff, c.empty+lockOff, c.empty+distOff
	c.id = uint64(rand.Uint32()|1) << 32
	if c.nslots <= 0 || c.ringN <= 0 || c.minBuf == 0 || c.minBuf&(c.minBuf-1) != 0 {
		close(c.done)
		c.Close()
		return nil, fmt.Errorf("%w: bad layout from the node", kv.ErrUnreachable)
	}
	go c.returner()
	return c, nil
}

// CacheHits is how many operations went straight to a cached slot.
func (c *Client) CacheHits() uint64 { return c.hits.Load() }

func (c *Client) slotAddr(i int) uint64 { return c.base + uint64(i*slotSize) }

// class is the free list (queue) of an n-byte item.
func (c *Client) class(n int) uint32 {
	k := bits.Len(uint(n-1)) - bits.Len32(c.minBuf-1)
	return uint32(max(k, 0))
}

// giveBack queues an item buffer for return to the node.
func (c *Client) giveBack(ptr, n uint64) {
	c.rmu.Lock()
	c.returns = append(c.returns, prism.Returned{Addr: ptr, Class: c.class(int(n))})
	full := len(c.returns) >= c.cfg.ReturnBatch
	c.rmu.Unlock()
	if full {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// returner returns queued buffers in batches: one FETCH_AND_ADD reserves
// ring slots, one CAS per buffer fills them.
func (c *Client) returner() {
	defer close(c.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			c.flushReturns()
			return
		case <-c.kick:
		case <-t.C:
		}
		c.rmu.Lock()
		batch := c.returns
		c.returns = nil
		c.rmu.Unlock()
		for len(batch) > 0 {
			k := min(len(batch), 64)
			left, err := c.returnBatch(batch[:k])
			if err != nil {
				return // the connection is gone
			}
			batch = append(left, batch[k:]...)
			if len(left) > 0 {
				time.Sleep(time.Millisecond) // the node is a lap behind
			}
		}
	}
}

// flushReturns returns, as the client closes, the buffers still queued,
// once: those whose ring slot is occupied stay lost to the node.
func (c *Client) flushReturns() {
	c.rmu.Lock()
	batch := c.returns
	c.returns = nil
	c.rmu.Unlock()
	for len(batch) > 0 {
		k := min(len(batch), 64)
		if _, err := c.returnBatch(batch[:k]); err != nil {
			return
		}
		batch = batch[k:]
	}
}

// returnBatch returns up to 64 buffers (8·64 bytes of CAS results fit the
// item area), giving back those whose ring slot was still occupied.
func (c *Client) returnBatch(bufs []prism.Returned) ([]prism.Returned, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return nil, kv.ErrClosed
	}
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	wrs := make([]verbs.SendWR, len(bufs))
	for i := range wrs {
		wrs[i].SGL = make([]verbs.SGE, 0, 1)
	}
	prism.ReturnWRs(wrs, 0, c.rkey, c.ring, len(bufs), s.SGE(offRing, 8))
	wc, err := c.ops.Do(ctx, s, wrs[:1])
	if err != nil {
		return nil, err
	}
	if wc.Status != verbs.StatusSuccess {
		c.ops.Release(s)
		return nil, wc.Status.Err()
	}
	first := binary.NativeEndian.Uint64(s.Buf[offRing:])
	hook(hookReturning)
	res := s.SGE(offItem, 8*len(bufs))
	prism.FillWRs(wrs, 0, c.rkey, c.ring, c.ringN, first, bufs, res)
	wc, err = c.ops.Do(ctx, s, wrs)
	if err != nil {
		return nil, err
	}
	defer c.ops.Release(s)
	if wc.Status != verbs.StatusSuccess {
		return nil, wc.Status.Err()
	}
	var left []prism.Returned
	for i, b := range bufs {
		if binary.NativeEndian.Uint64(s.Buf[offItem+8*i:]) != 0 {
			left = append(left, b)
		}
	}
	return left, nil
}

// mapErr turns RPC and connection errors into kv's.
func (c *Client) mapErr(err error) error { return remote.MapErr(err, c.closed.Load()) }

// RoundTrips counts the client's round trips to the node so far: request
// lists of one-sided operations and RPCs.
func (c *Client) RoundTrips() uint64 { return c.ops.Trips() }

// Close implements kv.Store; it returns the buffers still queued for
// return first.
func (c *Client) Close() error {
	c.once.Do(func() {
		select {
		case <-c.done:
		default:
			close(c.stop)
			<-c.done
		}
		c.closed.Store(true)
		c.rpc.Close()
		c.life.Lock()
		if c.ops != nil {
			c.ops.Close()
		}
		c.life.Unlock()
	})
	return nil
}
