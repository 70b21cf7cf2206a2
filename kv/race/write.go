package race

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// RACE's PUT and DELETE (write), one attempt at a time until one lands:
//
//  1. enter: FETCH_AND_ADD 1 on the subtable's control word (register as a
//     writer) and READ both combined buckets, one list. A subtable locked
//     by a split, or one that split since the directory was cached, is left
//     again (retreat) and the directory refreshed.
//  2. locate: the key's slot among the candidates, or for an insert the
//     first empty one; four full buckets split the subtable (grow).
//  3. install: WRITE the new block out of place, CAS the slot from the word
//     read to the block's (0 for a DELETE), and for an insert READ both
//     buckets again, one list. A lost CAS tries again (pause).
//  4. dedupe: an insert whose key a concurrent insert put in a slot at a
//     lower address takes its own copy back (the lower address wins).
//  5. leave: FETCH_AND_ADD -1 on the control word, free the replaced
//     block (after a grace time), update the slot cache.

// writeOp is one PUT or DELETE: what it writes and where the key may live.
type writeOp struct {
	key, value []byte
	del        bool
	p          place
	n          int // the new block's length
}

// retry is a write's state across attempts.
type retry struct {
	backoff time.Duration // RACE's truncated exponential backoff
	start   time.Time
	lost    int // CASes lost so far (Smart's backoff follows it)
}

// wait sleeps the current backoff and doubles it (up to 2 ms).
func (r *retry) wait() {
	time.Sleep(r.backoff)
	r.double()
}

func (r *retry) double() { r.backoff = min(2*r.backoff, 2*time.Millisecond) }

// write runs a PUT (del false) or a DELETE of key: Smart-HT's speculative
// path first when the slot cache knows the key, else RACE's.
func (c *Client) write(ctx context.Context, key, value []byte, del bool) error {
	op := writeOp{key: key, value: value, del: del, p: placeOf(key), n: blockLen(len(key), len(value))}
	if !del {
		if x, ok := c.cfg.Cache.lookup(key); ok {
			done, err := c.specWrite(ctx, key, value, op.p, x)
			if err != nil || done {
				return err
			}
		}
	}
	var cands [4 * bucketSlots]candidate
	r := retry{backoff: 20 * time.Microsecond, start: time.Now()}
	for attempt := 0; ; attempt++ {
		if err := c.pause(&r, attempt); err != nil {
			return err
		}
		done, err := c.attempt(ctx, &op, &r, cands[:0])
		if err != nil || done {
			return err
		}
	}
}

// pause waits before an attempt: Smart's conflict avoidance after a lost
// CAS when configured, else RACE's backoff once contended (after 8
// attempts). It gives up after 1000 attempts and 30 s.
func (c *Client) pause(r *retry, attempt int) error {
	if attempt > 1000 && time.Since(r.start) > 30*time.Second {
		return fmt.Errorf("%w: a write kept losing its races for %v", kv.ErrUnreachable, time.Since(r.start).Round(time.Second))
	}
	if c.bo != nil && r.lost > 0 {
		c.bmu.Lock()
		d := c.bo.Delay(r.lost, rand.Float64())
		c.bmu.Unlock()
		time.Sleep(d)
	} else if attempt > 8 { // contended: back off (truncated exponential) before trying again
		time.Sleep(time.Duration(rand.Int64N(int64(r.backoff))))
		r.double()
	}
	return nil
}

// attempt runs one try of op, steps 1 to 5; false and no error: try
// again.
func (c *Client) attempt(ctx context.Context, op *writeOp, r *retry, cands []candidate) (bool, error) {
	_, _, e := c.entry(op.p.h)
	sub := dirAddr(e)
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return false, c.mapErr(err)
	}
	// 1. Enter.
	if err := c.readBuckets(ctx, s, sub, op.p, true); err != nil {
		return false, c.mapErr(err)
	}
	if locked, stale := entered(s, e, op.p); locked || stale {
		return false, c.retreat(ctx, s, sub, locked, r)
	}
	// 2. Locate.
	cs := candidates(s, sub, op.p, cands)
	x, _, found, err := c.find(ctx, s, cs, op.p, op.key)
	if errors.Is(err, errRetry) {
		return false, c.leave(ctx, s, sub)
	}
	if err != nil {
		return false, c.mapErr(err)
	}
	if op.del && !found {
		return true, c.leave(ctx, s, sub)
	}
	target, old := x.addr, x.word
	if !found {
		if target = emptySlot(cs); target == 0 { // the four buckets are full
			return false, c.grow(ctx, s, sub, r)
		}
	}
	// 3. Install.
	newWord, blk, won, err := c.install(ctx, s, op, sub, target, old, found)
	if err != nil {
		return false, err
	}
	if !won {
		r.lost++
		if !op.del {
			c.freeBlock(blk, op.n, false) // never reachable
		}
		return false, c.leave(ctx, s, sub)
	}
	// 4. Dedupe.
	if !found {
		if err := c.dedupe(ctx, s, op, sub, target, newWord, blk, cands); err != nil {
			return false, err
		}
	}
	// 5. Leave.
	if err := c.leave(ctx, s, sub); err != nil {
		return false, err
	}
	if found {
		c.freeBlock(slotAddr(old), slotUnits(old)*blockUnit, true)
	}
	c.observe(r.lost)
	if op.del {
		c.cfg.Cache.drop(op.key)
	} else {
		c.cfg.Cache.put(op.key, candidate{addr: target, word: newWord, sub: sub})
	}
	return true, nil
}

// entered reads the control word the entering FETCH_AND_ADD returned:
// locked by a split, or stale (its depth or suffix do not match the
// cached directory entry e: the subtable split since).
func entered(s remote.Slot, e uint64, p place) (locked, stale bool) {
	ctl := binary.NativeEndian.Uint64(s.Buf[offCtl:])
	return ctl&ctlLock != 0, ctlDepth(ctl) != dirDepth(e) || p.h&(1<<ctlDepth(ctl)-1) != ctlSuffix(ctl)
}

// retreat leaves a subtable found locked or stale, waits when a split
// holds it, and refreshes the directory.
func (c *Client) retreat(ctx context.Context, s remote.Slot, sub uint64, locked bool, r *retry) error {
	if err := c.exit(ctx, s, sub); err != nil {
		return c.mapErr(err)
	}
	c.ops.Release(s)
	if locked {
		r.wait()
	}
	return c.refresh(ctx)
}

// emptySlot is the first empty slot of cs (in address order), or 0.
func emptySlot(cs []candidate) uint64 {
	for _, y := range cs {
		if y.word == 0 {
			return y.addr
		}
	}
	return 0
}

// grow leaves a subtable whose four buckets are full and splits it,
// waiting instead when another client is splitting it; then it refreshes
// the directory.
func (c *Client) grow(ctx context.Context, s remote.Slot, sub uint64, r *retry) error {
	if err := c.leave(ctx, s, sub); err != nil {
		return err
	}
	did, err := c.split(ctx, sub)
	if err != nil {
		return err
	}
	if !did { // another client is splitting it
		r.wait()
	}
	return c.refresh(ctx)
}

// install writes op's block out of place and CASes the slot at target
// from old to the block's word (to 0 for a DELETE), in one list; an
// insert (found false) reads both combined buckets again in the same
// list, for dedupe. won false: another writer changed the slot first
// (blk, never reachable, is the caller's to free).
func (c *Client) install(ctx context.Context, s remote.Slot, op *writeOp, sub, target, old uint64, found bool) (newWord, blk uint64, won bool, err error) {
	var w []verbs.SendWR
	if !op.del {
		blk, err = c.allocBlock(ctx, op.n)
		if err != nil {
			c.exit(ctx, s, sub)
			c.ops.Release(s)
			return 0, 0, false, err
		}
		putBlock(s.Buf[offNew:], op.key, op.value)
		newWord = mkSlot(blk, op.n, op.p.fp)
		w = append(w, verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offNew, op.n)}, RemoteAddr: blk, RKey: c.rkey})
	}
	cas := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: target, RKey: c.rkey}
	cas.Atomic.Compare[0], cas.Atomic.Swap[0] = old, newWord
	w = append(w, cas)
	if !found { // an insert: read the buckets again to catch a concurrent insert of the same key
		p := op.p
		w = append(w,
			verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC1, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group1, p.half1)), RKey: c.rkey},
			verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC2, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group2, p.half2)), RKey: c.rkey})
	}
	w[len(w)-1].Flags |= verbs.FlagSignaled
	if err := c.do(ctx, s, w); err != nil {
		return 0, 0, false, c.mapErr(err)
	}
	return newWord, blk, binary.NativeEndian.Uint64(s.Buf[offCAS:]) == old, nil
}

// dedupe settles a concurrent insert of the same key, from the buckets
// install read again: another slot at a lower address with the same key
// wins, and ours (target, holding newWord) goes by a CAS back to 0 — our
// PUT ordered before theirs.
func (c *Client) dedupe(ctx context.Context, s remote.Slot, op *writeOp, sub, target, newWord, blk uint64, cands []candidate) error {
	for _, y := range candidates(s, sub, op.p, cands) {
		if y.addr >= target {
			break
		}
		if y.word == 0 || slotFP(y.word) != op.p.fp {
			continue
		}
		_, dup, err := c.readKey(ctx, s, y.word, op.key)
		if err != nil && !errors.Is(err, errRetry) {
			return c.mapErr(err)
		}
		if !dup {
			continue
		}
		undo := []verbs.SendWR{{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: target, RKey: c.rkey}}
		undo[0].Atomic.Compare[0] = newWord
		if err := c.do(ctx, s, undo); err != nil {
			return c.mapErr(err)
		}
		if binary.NativeEndian.Uint64(s.Buf[offCAS:]) == newWord {
			c.freeBlock(blk, op.n, true)
		}
		return nil
	}
	return nil
}

// exit leaves a subtable entered by readBuckets: FETCH_AND_ADD -1 on its
// control word.
func (c *Client) exit(ctx context.Context, s remote.Slot, sub uint64) error {
	w := []verbs.SendWR{{Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: sub, RKey: c.rkey}}
	w[0].Atomic.Swap[0] = ^uint64(0) // -1
	return c.do(ctx, s, w)
}

// leave exits subtable sub and releases the slot.
func (c *Client) leave(ctx context.Context, s remote.Slot, sub uint64) error {
	err := c.exit(ctx, s, sub)
	c.ops.Release(s)
	if err != nil { // (MapErr allocates even for nil)
		return c.mapErr(err)
	}
	return nil
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
