package race

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Poll is how the client's completion poller waits (default
	// adaptive).
	Poll verbs.PollPolicy
	// Slots is the number of operations in flight at once (default 16).
	// The QP needs room for about 6×Slots send requests.
	Slots int
	// Cache, when set, maps keys to the slot that last held them
	// (Smart-HT's speculative lookup): a GET of a cached key takes one
	// round trip, and so does a PUT that updates it. Nil: every operation
	// reads both combined buckets first (RACE).
	Cache *SlotCache
	// Backoff, when set, waits before retrying a lost CAS as Smart's
	// conflict avoidance does (truncated exponential backoff, with
	// Dynamic the limit follows the retry rate). Nil: retry at once (RACE),
	// backing off only after 8 losses in a row.
	Backoff *smart.BackoffConfig
	// Runtime, when set, runs the one-sided request lists as tasks of
	// this smart runtime (Smart-HT): on its workers' QPs to the node (it
	// must live on the client's device and PD), under their work-request
	// throttling. The connection given to NewClient then carries only the
	// RPCs. Nil: the lists go on that connection too.
	Runtime *smart.Runtime
}

// Client is a RACE hashing client: every operation is one-sided. It
// implements kv.Store.
type Client struct {
	cfg    ClientConfig
	rpc    *rpc.Client
	ops    remote.Poster
	base   uint64
	rkey   uint32
	id     uint64
	closed atomic.Bool
	rpcs   atomic.Uint64
	once   sync.Once
	life   sync.RWMutex

	dmu   sync.RWMutex
	depth uint
	dir   []uint64
	rmu   sync.Mutex // one directory refresh or split at a time
	dirMR verbs.MR

	amu    sync.Mutex
	chunk  uint64
	end    uint64
	free   map[int][]uint64
	grace  []freedBlock
	splits atomic.Uint64
	misses atomic.Uint64

	bmu sync.Mutex
	bo  *smart.Backoff
}

type freedBlock struct {
	addr  uint64
	units int
	at    time.Time
}

var _ kv.Store = (*Client)(nil)

// Layout of an operation's buffer.
const (
	offCtl   = 0
	offCAS   = 8
	offEntry = 16
	offDepth = 24
	offC1    = 64
	offC2    = offC1 + 2*bucketBytes
	offBlock = offC2 + 2*bucketBytes
	maxBlock = (blockHead + kv.MaxKey + kv.MaxValue + 8 + 63) &^ 63
	offNew   = offBlock + maxBlock
	opBuf    = offNew + maxBlock
)

// Errors.
var errRetry = errors.New("race: retry")

// NewClient starts a client on qp, connected to a node's Serve.
func NewClient(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ, cfg ClientConfig) (*Client, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	c := &Client{cfg: cfg, id: rand.Uint64() | 1, free: map[int][]uint64{}}
	if cfg.Backoff != nil {
		c.bo = smart.NewBackoff(*cfg.Backoff)
	}
	if cfg.Runtime != nil {
		rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		ops, err := remote.NewTaskOps(ctx, pd, cfg.Runtime, cfg.Slots+1, opBuf)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("race: %w", err)
		}
		c.rpc, c.ops = rc, ops
	} else {
		rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		ops, err := remote.New(pd, qp, cfg.Slots+1, opBuf, rc)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("race: %w", err)
		}
		c.rpc, c.ops = rc, ops
	}
	var err error
	if c.dirMR, err = pd.AllocMR(max(8<<MaxDepth, subtableSize)+64, verbs.AccessLocalWrite); err != nil {
		c.Close()
		return nil, fmt.Errorf("race: %w", err)
	}
	var info [12]byte
	if _, err := c.rpc.Call(ctx, methodInfo, nil, info[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("race: node info: %w", c.mapErr(err))
	}
	c.base, c.rkey = binary.LittleEndian.Uint64(info[:]), binary.LittleEndian.Uint32(info[8:])
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Splits is how many subtable splits this client performed.
func (c *Client) Splits() uint64 { return c.splits.Load() }

// Depth is the global depth the client's directory cache holds.
func (c *Client) Depth() int {
	c.dmu.RLock()
	defer c.dmu.RUnlock()
	return int(c.depth)
}

// do runs one list on a slot and checks the signaled completion.
func (c *Client) do(ctx context.Context, s remote.Slot, wrs []verbs.SendWR) error {
	wc, err := c.ops.Do(ctx, s, wrs)
	if err != nil {
		return err
	}
	if wc.Status != verbs.StatusSuccess {
		return fmt.Errorf("%w: %v: %w", kv.ErrUnreachable, wc.Opcode, wc.Status.Err())
	}
	return nil
}

// directory cache ----------------------------------------------------------

// refresh reads the global depth and the directory into the cache.
func (c *Client) refresh(ctx context.Context) error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.refreshLocked(ctx)
}

func (c *Client) refreshLocked(ctx context.Context) error {
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	rd := func(addr uint64, n int, dst verbs.SGE) error {
		dst.Length = uint32(n)
		w := []verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{dst}, RemoteAddr: addr, RKey: c.rkey}}
		return c.do(ctx, s, w)
	}
	if err := rd(c.base, 8, s.SGE(offDepth, 8)); err != nil {
		return c.mapErr(err)
	}
	d := uint(binary.NativeEndian.Uint64(s.Buf[offDepth:]))
	c.ops.Release(s)
	if d > MaxDepth {
		return fmt.Errorf("%w: global depth %d", kv.ErrUnreachable, d)
	}
	s, err = c.ops.Acquire(ctx)
	if err != nil {
		return c.mapErr(err)
	}
	dst := verbs.SGE{Addr: c.dirMR.Addr(), LKey: c.dirMR.LKey()}
	if err := rd(c.base+dirOff, 8<<d, dst); err != nil {
		return c.mapErr(err)
	}
	c.ops.Release(s)
	dir := make([]uint64, 1<<d)
	for i := range dir {
		dir[i] = binary.NativeEndian.Uint64(c.dirMR.Bytes()[8*i:])
	}
	c.dmu.Lock()
	c.depth, c.dir = d, dir
	c.dmu.Unlock()
	return nil
}

// entry is the cached directory entry for hash h.
func (c *Client) entry(h uint64) (uint, int, uint64) {
	c.dmu.RLock()
	defer c.dmu.RUnlock()
	i := int(h & (1<<c.depth - 1))
	return c.depth, i, c.dir[i]
}

// stale reports whether the node's directory entry i (under the cached
// depth d) or its global depth differ from the cache: a miss must then
// look again.
func (c *Client) stale(ctx context.Context, s remote.Slot, d uint, i int, e uint64) (bool, error) {
	w := []verbs.SendWR{
		{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offDepth, 8)}, RemoteAddr: c.base, RKey: c.rkey},
		{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offEntry, 8)}, RemoteAddr: c.base + dirOff + 8*uint64(i), RKey: c.rkey},
	}
	if err := c.do(ctx, s, w); err != nil {
		return false, err
	}
	return binary.NativeEndian.Uint64(s.Buf[offDepth:]) != uint64(d) || binary.NativeEndian.Uint64(s.Buf[offEntry:]) != e, nil
}

// buckets -----------------------------------------------------------------

// candidate is a slot of a key's combined buckets.
type candidate struct {
	addr uint64
	word uint64
	sub  uint64 // the subtable it was found in
}

// readBuckets reads the two combined buckets of p in subtable sub; with
// enter, a FETCH_AND_ADD first registers a writer in the subtable (its
// control word lands at offCtl).
func (c *Client) readBuckets(ctx context.Context, s remote.Slot, sub uint64, p place, enter bool) error {
	var w [3]verbs.SendWR
	n := 0
	if enter {
		w[n] = verbs.SendWR{Opcode: verbs.OpAtomicFetchAndAdd, SGL: []verbs.SGE{s.SGE(offCtl, 8)}, RemoteAddr: sub, RKey: c.rkey}
		w[n].Atomic.Swap[0] = 1
		n++
	}
	w[n] = verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC1, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group1, p.half1)), RKey: c.rkey}
	w[n+1] = verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offC2, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group2, p.half2)), RKey: c.rkey}
	return c.do(ctx, s, w[:n+2])
}

// candidates lists the distinct slots of the two combined buckets read,
// in address order.
func candidates(s remote.Slot, sub uint64, p place, out []candidate) []candidate {
	out = out[:0]
	add := func(off, base int) {
		for i := 0; i < 2*bucketSlots; i++ {
			a := sub + uint64(base+8*i)
			dup := false
			for _, x := range out {
				if x.addr == a {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, candidate{addr: a, word: binary.NativeEndian.Uint64(s.Buf[off+8*i:])})
			}
		}
	}
	add(offC1, combinedOff(p.group1, p.half1))
	add(offC2, combinedOff(p.group2, p.half2))
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// readKey reads the block a slot points to and returns its value when it
// holds key (found), or found false. A block whose CRC does not verify is
// reported with errRetry.
func (c *Client) readKey(ctx context.Context, s remote.Slot, word uint64, key []byte) ([]byte, bool, error) {
	n := slotUnits(word) * blockUnit
	rd := func(addr uint64, off, n int) error {
		w := []verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(off, n)}, RemoteAddr: addr, RKey: c.rkey}}
		return c.do(ctx, s, w)
	}
	if n == 0 || n > maxBlock {
		return nil, false, errRetry
	}
	if err := rd(slotAddr(word), offBlock, n); err != nil {
		return nil, false, err
	}
	if full := blockSize(s.Buf[offBlock:]); full > n && slotUnits(word) == maxUnits && full <= maxBlock {
		if err := rd(slotAddr(word)+uint64(n), offBlock+n, full-n); err != nil {
			return nil, false, err
		}
		n = full
	}
	k, v, ok := readBlock(s.Buf[offBlock : offBlock+n])
	if !ok {
		return nil, false, errRetry
	}
	if !bytes.Equal(k, key) {
		return nil, false, nil
	}
	return v, true, nil
}

// find looks key up among cands: its slot, or found false.
func (c *Client) find(ctx context.Context, s remote.Slot, cands []candidate, p place, key []byte) (candidate, []byte, bool, error) {
	for _, x := range cands {
		if x.word == 0 || slotFP(x.word) != p.fp {
			continue
		}
		v, ok, err := c.readKey(ctx, s, x.word, key)
		if err != nil {
			return candidate{}, nil, false, err
		}
		if ok {
			return x, v, true, nil
		}
	}
	return candidate{}, nil, false, nil
}

// Get ----------------------------------------------------------------------

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
	p := placeOf(key)
	var cands [4 * bucketSlots]candidate
	for attempt := 0; ; attempt++ {
		if attempt > 1000 {
			return dst, fmt.Errorf("%w: GET kept finding a changing table", kv.ErrUnreachable)
		}
		if v, ok := c.cfg.Cache.get(c, ctx, key, dst); ok {
			return v, nil
		}
		d, i, e := c.entry(p.h)
		s, err := c.ops.Acquire(ctx)
		if err != nil {
			return dst, c.mapErr(err)
		}
		if err := c.readBuckets(ctx, s, dirAddr(e), p, false); err != nil {
			return dst, c.mapErr(err)
		}
		cs := candidates(s, dirAddr(e), p, cands[:0])
		x, v, ok, err := c.find(ctx, s, cs, p, key)
		if errors.Is(err, errRetry) {
			c.ops.Release(s)
			continue
		}
		if err != nil {
			return dst, c.mapErr(err)
		}
		if ok {
			dst = append(dst, v...)
			c.ops.Release(s)
			x.sub = dirAddr(e)
			c.cfg.Cache.put(key, x)
			return dst, nil
		}
		c.misses.Add(1)
		st, err := c.stale(ctx, s, d, i, e)
		if err != nil {
			return dst, c.mapErr(err)
		}
		c.ops.Release(s)
		if !st {
			return dst, kv.ErrNotFound
		}
		if err := c.refresh(ctx); err != nil {
			return dst, err
		}
	}
}

// writes -------------------------------------------------------------------

// Put implements kv.Store.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	return c.write(ctx, key, value, false)
}

// Delete implements kv.Store.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := kv.Check(key, nil); err != nil {
		return err
	}
	return c.write(ctx, key, nil, true)
}

// exit leaves a subtable entered by readBuckets.
func (c *Client) exit(ctx context.Context, s remote.Slot, sub uint64) error {
	w := []verbs.SendWR{{Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: sub, RKey: c.rkey}}
	w[0].Atomic.Swap[0] = ^uint64(0) // -1
	return c.do(ctx, s, w)
}

func (c *Client) write(ctx context.Context, key, value []byte, del bool) error {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return kv.ErrClosed
	}
	p := placeOf(key)
	n := blockLen(len(key), len(value))
	if !del {
		if x, ok := c.cfg.Cache.lookup(key); ok {
			done, err := c.specWrite(ctx, key, value, p, x)
			if err != nil || done {
				return err
			}
		}
	}
	var cands [4 * bucketSlots]candidate
	backoff := 20 * time.Microsecond
	start := time.Now()
	lost := 0
	for attempt := 0; ; attempt++ {
		if attempt > 1000 && time.Since(start) > 30*time.Second {
			return fmt.Errorf("%w: a write kept losing its races for %v", kv.ErrUnreachable, time.Since(start).Round(time.Second))
		}
		if c.bo != nil && lost > 0 {
			c.bmu.Lock()
			d := c.bo.Delay(lost, rand.Float64())
			c.bmu.Unlock()
			time.Sleep(d)
		} else if attempt > 8 { // contended: back off (truncated exponential) before trying again
			time.Sleep(time.Duration(rand.Int64N(int64(backoff))))
			backoff = min(2*backoff, 2*time.Millisecond)
		}
		_, _, e := c.entry(p.h)
		sub := dirAddr(e)
		s, err := c.ops.Acquire(ctx)
		if err != nil {
			return c.mapErr(err)
		}
		if err := c.readBuckets(ctx, s, sub, p, true); err != nil {
			return c.mapErr(err)
		}
		ctl := binary.NativeEndian.Uint64(s.Buf[offCtl:])
		locked := ctl&ctlLock != 0
		stale := ctlDepth(ctl) != dirDepth(e) || p.h&(1<<ctlDepth(ctl)-1) != ctlSuffix(ctl)
		if locked || stale {
			if err := c.exit(ctx, s, sub); err != nil {
				return c.mapErr(err)
			}
			c.ops.Release(s)
			if locked {
				time.Sleep(backoff)
				backoff = min(2*backoff, 2*time.Millisecond)
			}
			if err := c.refresh(ctx); err != nil {
				return err
			}
			continue
		}
		cs := candidates(s, sub, p, cands[:0])
		x, _, found, err := c.find(ctx, s, cs, p, key)
		if errors.Is(err, errRetry) {
			err = c.exit(ctx, s, sub)
			c.ops.Release(s)
			if err != nil {
				return c.mapErr(err)
			}
			continue
		}
		if err != nil {
			return c.mapErr(err)
		}
		if del && !found {
			err := c.exit(ctx, s, sub)
			c.ops.Release(s)
			return c.mapErr(err)
		}
		target, old := x.addr, x.word
		if !found {
			target = 0
			for _, y := range cs {
				if y.word == 0 {
					target = y.addr
					break
				}
			}
			if target == 0 { // the four buckets are full: split, then retry
				err := c.exit(ctx, s, sub)
				c.ops.Release(s)
				if err != nil {
					return c.mapErr(err)
				}
				did, err := c.split(ctx, sub)
				if err != nil {
					return err
				}
				if !did { // another client is splitting it
					time.Sleep(backoff)
					backoff = min(2*backoff, 2*time.Millisecond)
				}
				if err := c.refresh(ctx); err != nil {
					return err
				}
				continue
			}
		}
		var newWord, blk uint64
		var w []verbs.SendWR
		if !del {
			blk, err = c.allocBlock(ctx, n)
			if err != nil {
				c.exit(ctx, s, sub)
				c.ops.Release(s)
				return err
			}
			putBlock(s.Buf[offNew:], key, value)
			newWord = mkSlot(blk, n, p.fp)
			w = append(w, verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offNew, n)}, RemoteAddr: blk, RKey: c.rkey})
		}
		cas := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: target, RKey: c.rkey}
		cas.Atomic.Compare[0], cas.Atomic.Swap[0] = old, newWord
		w = append(w, cas)
		if !found { // an insert: read the buckets again to catch a concurrent insert of the same key
			w = append(w,
				verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC1, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group1, p.half1)), RKey: c.rkey},
				verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC2, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group2, p.half2)), RKey: c.rkey})
		}
		w[len(w)-1].Flags |= verbs.FlagSignaled
		if err := c.do(ctx, s, w); err != nil {
			return c.mapErr(err)
		}
		if binary.NativeEndian.Uint64(s.Buf[offCAS:]) != old {
			lost++
			if !del {
				c.freeBlock(blk, n, false) // never reachable
			}
			err := c.exit(ctx, s, sub)
			c.ops.Release(s)
			if err != nil {
				return c.mapErr(err)
			}
			continue
		}
		if !found {
			// Another slot at a lower address with the same key wins;
			// ours goes (our PUT ordered before theirs).
			cs = candidates(s, sub, p, cands[:0])
			for _, y := range cs {
				if y.addr >= target {
					break
				}
				if y.word == 0 || slotFP(y.word) != p.fp {
					continue
				}
				_, dup, err := c.readKey(ctx, s, y.word, key)
				if err != nil && !errors.Is(err, errRetry) {
					return c.mapErr(err)
				}
				if dup {
					undo := []verbs.SendWR{{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: target, RKey: c.rkey}}
					undo[0].Atomic.Compare[0] = newWord
					if err := c.do(ctx, s, undo); err != nil {
						return c.mapErr(err)
					}
					if binary.NativeEndian.Uint64(s.Buf[offCAS:]) == newWord {
						c.freeBlock(blk, n, true)
					}
					break
				}
			}
		}
		err = c.exit(ctx, s, sub)
		c.ops.Release(s)
		if err != nil {
			return c.mapErr(err)
		}
		if found {
			c.freeBlock(slotAddr(old), slotUnits(old)*blockUnit, true)
		}
		c.observe(lost)
		if del {
			c.cfg.Cache.drop(key)
		} else {
			c.cfg.Cache.put(key, candidate{addr: target, word: newWord, sub: sub})
		}
		return nil
	}
}

// observe feeds a finished write's lost CASes to the backoff controller.
func (c *Client) observe(lost int) {
	if c.bo == nil {
		return
	}
	c.bmu.Lock()
	c.bo.Observe(lost)
	c.bo.Tick(time.Now())
	c.bmu.Unlock()
}

// BackoffStats returns Smart's conflict-avoidance state (zero without
// Backoff): the current C_max and the last retry rate.
func (c *Client) BackoffStats() (time.Duration, float64) {
	if c.bo == nil {
		return 0, 0
	}
	c.bmu.Lock()
	defer c.bmu.Unlock()
	return c.bo.CMax(), c.bo.RetryRate()
}

// specPut updates a cached key in one round trip: enter the subtable,
// write the block, test that no split holds the subtable (a masked CAS
// that swaps nothing), and only then (CONDITIONAL) CAS the cached slot
// from the cached word; leave the subtable. A split that locks the
// subtable after the test waits for this writer to leave, so the CAS
// never lands in a subtable being copied. It reports false when the slot
// moved on, with the word the CAS found (the complement of x.word when
// the split test failed and the CAS did not run).
func (c *Client) specPut(ctx context.Context, key, value []byte, p place, x candidate) (bool, uint64, error) {
	n := blockLen(len(key), len(value))
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return false, 0, c.mapErr(err)
	}
	blk, err := c.allocBlock(ctx, n)
	if err != nil {
		c.ops.Release(s)
		return false, 0, err
	}
	putBlock(s.Buf[offNew:], key, value)
	newWord := mkSlot(blk, n, p.fp)
	binary.NativeEndian.PutUint64(s.Buf[offCAS:], ^x.word) // a skipped CAS leaves this
	w := []verbs.SendWR{
		{Opcode: verbs.OpAtomicFetchAndAdd, SGL: []verbs.SGE{s.SGE(offCtl, 8)}, RemoteAddr: x.sub, RKey: c.rkey},
		{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offNew, n)}, RemoteAddr: blk, RKey: c.rkey},
		{Opcode: verbs.OpMaskedCmpAndSwp, SGL: []verbs.SGE{s.SGE(offEntry, 8)}, RemoteAddr: x.sub, RKey: c.rkey,
			Atomic: verbs.AtomicArgs{Size: 8, Op: verbs.CmpEqual, CompareMask: [4]uint64{ctlLock}}},
		{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagConditional, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: x.addr, RKey: c.rkey},
		{Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offDepth, 8)}, RemoteAddr: x.sub, RKey: c.rkey},
	}
	w[0].Atomic.Swap[0] = 1
	w[3].Atomic.Compare[0], w[3].Atomic.Swap[0] = x.word, newWord
	w[4].Atomic.Swap[0] = ^uint64(0)
	if err := c.do(ctx, s, w); err != nil {
		return false, 0, c.mapErr(err)
	}
	cur := binary.NativeEndian.Uint64(s.Buf[offCAS:])
	c.ops.Release(s)
	if cur != x.word {
		c.freeBlock(blk, n, false)
		return false, cur, nil
	}
	c.cfg.Cache.put(key, candidate{addr: x.addr, word: newWord, sub: x.sub})
	c.freeBlock(slotAddr(x.word), slotUnits(x.word)*blockUnit, true)
	return true, cur, nil
}

// specTries bounds the speculative attempts of one write before it takes
// the full path.
const specTries = 4

// specWrite runs specPut from the cached slot x. When its CAS loses to
// another writer of the same slot (a hot key), the CAS has returned the
// slot's current word: if that word carries the key's fingerprint and
// its block holds this key (one READ checks it; a slot emptied and
// reused by another key fails the check), it installs over that version
// — two round trips instead of the full path's three or more — after
// Smart's conflict-avoidance backoff. It reports false to take the full
// path.
func (c *Client) specWrite(ctx context.Context, key, value []byte, p place, x candidate) (bool, error) {
	for lost := 0; lost < specTries; lost++ {
		done, cur, err := c.specPut(ctx, key, value, p, x)
		if err != nil {
			return false, err
		}
		if done {
			c.observe(lost)
			return true, nil
		}
		if cur == ^x.word || cur == 0 || slotFP(cur) != p.fp {
			break // a split held the subtable (the CAS did not run), or the slot is not this key's any more
		}
		if c.bo != nil {
			c.bmu.Lock()
			d := c.bo.Delay(lost+1, rand.Float64())
			c.bmu.Unlock()
			time.Sleep(d)
		}
		s, err := c.ops.Acquire(ctx)
		if err != nil {
			return false, c.mapErr(err)
		}
		_, mine, err := c.readKey(ctx, s, cur, key)
		if err != nil && !errors.Is(err, errRetry) {
			return false, c.mapErr(err)
		}
		c.ops.Release(s)
		if !mine {
			break
		}
		x.word = cur
		c.cfg.Cache.put(key, x)
	}
	c.cfg.Cache.drop(key)
	return false, nil
}

// blocks -------------------------------------------------------------------

// chunkSize is how much block memory a client takes from the node at once.
const chunkSize = 1 << 20

// graceTime is how long a freed block waits before reuse, so that a GET
// that read its slot just before still finds the block intact (its CRC
// and key check catch the rare reuse anyway).
const graceTime = 100 * time.Millisecond

func (c *Client) allocBlock(ctx context.Context, n int) (uint64, error) {
	units := (n + blockUnit - 1) / blockUnit
	c.amu.Lock()
	now := time.Now()
	k := 0
	for ; k < len(c.grace) && now.Sub(c.grace[k].at) >= graceTime; k++ {
		f := c.grace[k]
		c.free[f.units] = append(c.free[f.units], f.addr)
	}
	c.grace = c.grace[k:]
	if l := c.free[units]; len(l) > 0 {
		a := l[len(l)-1]
		c.free[units] = l[:len(l)-1]
		c.amu.Unlock()
		return a, nil
	}
	size := uint64(units * blockUnit)
	if c.chunk+size > c.end {
		c.amu.Unlock()
		var req [4]byte
		var resp [8]byte
		binary.LittleEndian.PutUint32(req[:], uint32(max(chunkSize, size)))
		c.rpcs.Add(1)
		if _, err := c.rpc.Call(ctx, methodAlloc, req[:], resp[:]); err != nil {
			return 0, c.mapErr(err)
		}
		c.amu.Lock()
		c.chunk = binary.LittleEndian.Uint64(resp[:])
		c.end = c.chunk + uint64(max(chunkSize, size))
	}
	a := c.chunk
	c.chunk += size
	c.amu.Unlock()
	return a, nil
}

// freeBlock returns a block to the client's free lists, after the grace
// time when it was reachable.
func (c *Client) freeBlock(addr uint64, n int, reachable bool) {
	units := (n + blockUnit - 1) / blockUnit
	if units >= maxUnits {
		return // size unknown from the slot alone: leave it
	}
	c.amu.Lock()
	if reachable {
		c.grace = append(c.grace, freedBlock{addr: addr, units: units, at: time.Now()})
	} else {
		c.free[units] = append(c.free[units], addr)
	}
	c.amu.Unlock()
}

// mapErr turns RPC and connection errors into kv's.
func (c *Client) mapErr(err error) error { return remote.MapErr(err, c.closed.Load()) }

// RoundTrips counts the client's round trips to the node so far: request
// lists of one-sided operations and RPCs.
func (c *Client) RoundTrips() uint64 { return c.ops.Trips() + c.rpcs.Load() }

// Close implements kv.Store.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.rpc.Close()
		c.life.Lock()
		if c.ops != nil {
			c.ops.Close()
		}
		if c.dirMR != nil {
			c.dirMR.Deregister()
		}
		c.life.Unlock()
	})
	return nil
}
