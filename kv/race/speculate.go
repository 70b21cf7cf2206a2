package race

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Smart-HT's speculative path: a key found in the SlotCache is read and
// updated through its cached slot, one round trip each, without reading
// the buckets first. Any doubt (the slot moved on to another key, a split
// holds the subtable, a torn block) falls back to RACE's path.

// get tries the speculative path; ok false means: do the full lookup.
func (sc *SlotCache) get(c *Client, ctx context.Context, key, dst []byte) ([]byte, bool) {
	if sc == nil {
		return dst, false
	}
	x, ok := sc.lookup(key)
	if !ok {
		return dst, false
	}
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return dst, false
	}
	n := slotUnits(x.word) * blockUnit
	if n == 0 || n > maxBlock {
		c.ops.Release(s)
		sc.drop(key)
		return dst, false
	}
	w, sgl := s.List(2) // the slot's own: a list here would escape
	sgl[0], sgl[1] = s.SGE(offCAS, 8), s.SGE(offBlock, n)
	w[0] = verbs.SendWR{Opcode: verbs.OpRead, SGL: sgl[0:1], RemoteAddr: x.addr, RKey: c.rkey}
	w[1] = verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: sgl[1:2], RemoteAddr: slotAddr(x.word), RKey: c.rkey}
	if err := c.do(ctx, s, w); err != nil {
		c.putBack(s, err)
		return dst, false // the full lookup reports the error
	}
	cur := binary.NativeEndian.Uint64(s.Buf[offCAS:])
	if cur == x.word && slotUnits(cur) < maxUnits {
		if k, v, ok := readBlock(s.Buf[offBlock : offBlock+n]); ok && bytes.Equal(k, key) {
			dst = append(dst, v...)
			c.ops.Release(s)
			sc.hits.Add(1)
			return dst, true
		}
	}
	if cur != 0 && cur != x.word && slotFP(cur) == slotFP(x.word) {
		// The slot moved on: follow it (the key keeps its slot while it
		// lives, unless a split moved it).
		v, found, err := c.readKey(ctx, s, cur, key)
		if err == nil {
			c.ops.Release(s)
			if found {
				sc.put(key, candidate{addr: x.addr, word: cur, sub: x.sub})
				sc.hits.Add(1)
				return append(dst, v...), true
			}
			sc.drop(key)
			sc.misses.Add(1)
			return dst, false
		}
		if err != errRetry {
			c.putBack(s, err)
			return dst, false
		}
	}
	c.ops.Release(s)
	sc.drop(key)
	sc.misses.Add(1)
	return dst, false
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
		// The list enters and leaves the subtable by itself: a caller
		// that gave up strands nothing but the block.
		c.putBack(s, err)
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
			c.putBack(s, err)
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
