package prismkv

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
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
}

// Client is a PRISM-KV store client. GET is one bounded indirect READ
// through the key's slot (linear probing on collision); PUT looks the
// slot up (or takes it from the slot cache) and installs the new item
// with one ALLOCATE → WRITE → CONDITIONAL CAS chain; DELETE installs a
// tombstone the same way. Replaced items go back to the node in batches
// through its return ring. It implements kv.Store.
type Client struct {
	cfg     ClientConfig
	rpc     *rpc.Client
	ops     *remote.Ops
	base    uint64
	rkey    uint32
	nslots  int
	empty   uint64
	ring    uint64
	ringN   int
	minBuf  uint32
	closed  atomic.Bool
	once    sync.Once
	life    sync.RWMutex
	hits    atomic.Uint64
	lookups atomic.Uint64

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
	offItem    = 64 // an item read
	itemRoom   = (maxItem + 63) &^ 63
	offNew     = offItem + itemRoom // the item a PUT writes
	opBuf      = offNew + itemRoom
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
	c := &Client{cfg: cfg, cache: newSlotCache(cfg.CacheKeys), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
	if err != nil {
		return nil, fmt.Errorf("prismkv: %w", err)
	}
	ops, err := remote.New(pd, qp, cfg.Slots, opBuf, rc)
	if err != nil {
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

// probe reads, through slot i, its item, and with withSlot also the
// slot's 16-byte value (which a PUT's CAS compares with; a GET does not
// need it). It returns the item's bytes (in s.Buf) and the slot value.
func (c *Client) probe(ctx context.Context, s remote.Slot, i int, withSlot bool) (item []byte, ptr, n uint64, err error) {
	var wrs [2]verbs.SendWR
	var sgl [2]verbs.SGE
	k := 0
	if withSlot {
		sgl[0] = s.SGE(offSlot, slotSize)
		wrs[0] = verbs.SendWR{Opcode: verbs.OpRead, SGL: sgl[:1], RemoteAddr: c.slotAddr(i), RKey: c.rkey}
		k = 1
	}
	sgl[1] = s.SGE(offItem, maxItem)
	prism.IndirectRead(wrs[k:], 0, sgl[1], c.rkey, c.slotAddr(i), true)
	wc, err := c.ops.Do(ctx, s, wrs[:k+1])
	if err != nil {
		return nil, 0, 0, err
	}
	if wc.Status != verbs.StatusSuccess {
		return nil, 0, 0, fmt.Errorf("%w: indirect READ: %w", kv.ErrUnreachable, wc.Status.Err())
	}
	if withSlot {
		ptr, n = binary.NativeEndian.Uint64(s.Buf[offSlot:]), binary.NativeEndian.Uint64(s.Buf[offSlot+8:])
	}
	return s.Buf[offItem : offItem+int(wc.ByteLen)], ptr, n, nil
}

// find locates key's slot: found with its item's value and flags, or the
// empty slot that ends its probe sequence (i, found false).
type found struct {
	slot   int
	ptr, n uint64
	exists bool   // the slot holds key's item (maybe a tombstone)
	flags  byte   // of key's item
	value  []byte // in the slot's buffer
}

// Without withSlot (a GET) the slot values are not read.
func (c *Client) find(ctx context.Context, s remote.Slot, key []byte, withSlot bool) (found, error) {
	h := kv.Hash(key)
	start := int(h % uint64(c.nslots))
	if e, ok := c.cache.lookup(key, h); ok {
		item, ptr, n, err := c.probe(ctx, s, e.slot, withSlot)
		if err != nil {
			return found{}, err
		}
		if k, v, fl, ok := readItem(item); ok && fl&flagEmpty == 0 && bytes.Equal(k, key) {
			c.hits.Add(1)
			return found{slot: e.slot, ptr: ptr, n: n, exists: true, flags: fl, value: v}, nil
		}
		c.cache.forget(key, h) // stale
	}
	c.lookups.Add(1)
	rereads := 0
	for i, b := 0, start; i < c.nslots; i, b = i+1, (b+1)%c.nslots {
		item, ptr, n, err := c.probe(ctx, s, b, withSlot)
		if err != nil {
			return found{}, err
		}
		k, v, fl, ok := readItem(item)
		if !ok {
			// A bounded READ returns exactly the item the slot points
			// to, so this is a corrupt item: read once more, then fail.
			if rereads++; rereads > 3 {
				c.ops.Release(s)
				return found{}, fmt.Errorf("%w: slot %d points to a malformed item", kv.ErrUnreachable, b)
			}
			i, b = i-1, (b-1+c.nslots)%c.nslots
			continue
		}
		if fl&flagEmpty != 0 {
			return found{slot: b, ptr: ptr, n: n}, nil
		}
		if bytes.Equal(k, key) {
			if withSlot {
				c.cache.remember(key, h, cached{slot: b, ptr: ptr, n: n})
			} else if b != start {
				// A key away from its home slot: the next GET goes
				// straight there. (Its value is unknown: a PUT guesses, and
				// its CAS tells the value.) A key at home needs no entry.
				c.cache.remember(key, h, cached{slot: b})
			}
			return found{slot: b, ptr: ptr, n: n, exists: true, flags: fl, value: v}, nil
		}
	}
	return found{slot: -1}, nil
}

// Get implements kv.Store.
func (c *Client) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := kv.Check(key, nil); err != nil {
		return dst, err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return dst, kv.ErrClosed
	}
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return dst, c.mapErr(err)
	}
	f, err := c.find(ctx, s, key, false)
	if err != nil {
		return dst, c.mapErr(err) // the slot is not ours any more
	}
	defer c.ops.Release(s)
	if !f.exists || f.flags&flagTomb != 0 {
		return dst, kv.ErrNotFound
	}
	return append(dst, f.value...), nil
}

// Put implements kv.Store.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	return c.install(ctx, key, value, 0)
}

// Delete implements kv.Store: it installs a tombstone item.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := kv.Check(key, nil); err != nil {
		return err
	}
	return c.install(ctx, key, nil, flagTomb)
}

// install puts key's new item in its slot by the ALLOCATE → WRITE →
// CONDITIONAL CAS chain, retrying with the slot's current value when
// another writer got there first.
func (c *Client) install(ctx context.Context, key, value []byte, flags byte) error {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return kv.ErrClosed
	}
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	n := itemLen(len(key), len(value))
	putItem(s.Buf[offNew:], key, value, flags)
	queue := c.class(n)
	var slot int
	var oldPtr, oldN uint64
	h := kv.Hash(key)
	if e, ok := c.cache.lookup(key, h); ok {
		slot, oldPtr, oldN = e.slot, e.ptr, e.n // skip the lookup: a wrong guess fails the CAS, which tells the truth
		c.hits.Add(1)
	} else {
		var done bool
		if slot, oldPtr, oldN, done, err = c.locate(ctx, s, key, flags); done {
			return err
		}
	}
	var wrs [4]verbs.SendWR
	var sgl [4]verbs.SGE
	var bound [8]byte
	binary.NativeEndian.PutUint64(bound[:], uint64(n))
	for attempt := 0; ; attempt++ {
		sgl[0] = s.SGE(offNew, n)
		wrs[0] = verbs.SendWR{Opcode: verbs.OpAllocate, Flags: verbs.FlagRedirect, SGL: sgl[0:1], RKey: c.rkey, Queue: queue,
			RedirectAddr: verbs.ScratchAddr(0)}
		copy(s.Buf[offScratch:], bound[:]) // the WRITE's source: inline, copied at post
		sgl[1] = s.SGE(offScratch, 8)
		wrs[1] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.FlagInline, SGL: sgl[1:2], RemoteAddr: verbs.ScratchAddr(8)}
		sgl[2] = s.SGE(offCAS, 16)
		wrs[2] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: verbs.FlagConditional | verbs.FlagIndirectArg,
			SGL: sgl[2:3], RemoteAddr: c.slotAddr(slot), RKey: c.rkey, ArgAddr: verbs.ScratchAddr(0),
			Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpEqual, Compare: [4]uint64{oldPtr, oldN},
				CompareMask: [4]uint64{^uint64(0), ^uint64(0)}, SwapMask: [4]uint64{^uint64(0), ^uint64(0)}}}
		sgl[3] = s.SGE(offScratch, 8)
		wrs[3] = verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: sgl[3:4], RemoteAddr: verbs.ScratchAddr(0)}
		wc, err := c.ops.Do(ctx, s, wrs[:])
		if err != nil {
			return c.mapErr(err)
		}
		if wc.Status != verbs.StatusSuccess {
			c.ops.Release(s)
			return fmt.Errorf("%w: PUT chain: %w", kv.ErrUnreachable, wc.Status.Err())
		}
		newPtr := binary.NativeEndian.Uint64(s.Buf[offScratch:])
		curPtr, curN := binary.NativeEndian.Uint64(s.Buf[offCAS:]), binary.NativeEndian.Uint64(s.Buf[offCAS+8:])
		if curPtr == oldPtr && curN == oldN {
			c.cache.remember(key, h, cached{slot: slot, ptr: newPtr, n: uint64(n)})
			if oldPtr != c.empty {
				c.giveBack(oldPtr, oldN)
			}
			c.ops.Release(s)
			return nil
		}
		c.giveBack(newPtr, uint64(n)) // lost the race: this buffer was never reachable
		if oldPtr == c.empty || curPtr == c.empty {
			// The slot was empty when we looked (another key may have
			// taken it), or our cached guess is off: look again.
			c.cache.forget(key, h)
			var done bool
			if slot, oldPtr, oldN, done, err = c.locate(ctx, s, key, flags); done {
				return err
			}
			continue
		}
		// The slot holds another version of this key (a slot keeps its
		// key): install over that one.
		oldPtr, oldN = curPtr, curN
		if attempt > 1<<16 {
			c.ops.Release(s)
			return fmt.Errorf("%w: %d lost races in a row", kv.ErrUnreachable, attempt)
		}
	}
}

// locate looks key's slot up for an install: the slot and its current
// value, or done with install's result when there is nothing to install
// (every slot holds another key, or a DELETE of a key that never was);
// done releases s, except after a failed lookup, whose slot is not ours.
func (c *Client) locate(ctx context.Context, s remote.Slot, key []byte, flags byte) (slot int, ptr, n uint64, done bool, err error) {
	f, err := c.find(ctx, s, key, true)
	if err != nil {
		return 0, 0, 0, true, c.mapErr(err)
	}
	if f.slot < 0 {
		c.ops.Release(s)
		return 0, 0, 0, true, fmt.Errorf("%w: all %d slots hold other keys", kv.ErrFull, c.nslots)
	}
	if !f.exists && flags&flagTomb != 0 {
		c.ops.Release(s)
		return 0, 0, 0, true, nil // deleting a key that never was
	}
	return f.slot, f.ptr, f.n, false, nil
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

// Close implements kv.Store; buffers still queued for return are lost to
// the node until it restarts.
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
