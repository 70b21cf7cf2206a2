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
	n          int    // the new block's length
	blk        uint64 // a PUT's block, allocated before any attempt; 0 once installed
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
		// The block comes before any attempt: no RPC runs while the
		// client holds a writer count in a subtable.
		blk, err := c.allocBlock(ctx, op.n)
		if err != nil {
			return err
		}
		op.blk = blk
		defer func() {
			if op.blk != 0 { // never installed: never reachable
				c.freeBlock(op.blk, op.n, false)
			}
		}()
	}
	var cands [4 * bucketSlots]candidate
	r := retry{backoff: 20 * time.Microsecond, start: time.Now()}
	for attempt := 0; ; attempt++ {
		if err := c.pause(ctx, &r, attempt); err != nil {
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
// attempts). It gives up after 1000 attempts and 30 s, or when ctx ends.
func (c *Client) pause(ctx context.Context, r *retry, attempt int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
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
// again. From the enter on the client holds a writer count in the
// subtable, so its requests run under c.bg, not ctx: a caller that gives
// up cannot strand the count. ctx is looked at between the steps that
// change nothing; once the CAS is out, the write finishes.
func (c *Client) attempt(ctx context.Context, op *writeOp, r *retry, cands []candidate) (bool, error) {
	_, _, e := c.entry(op.p.h)
	sub := dirAddr(e)
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return false, c.mapErr(err)
	}
	// 1. Enter.
	if err := c.readBuckets(c.bg, s, sub, op.p, true); err != nil {
		c.putBack(s, err)
		return false, c.mapErr(err)
	}
	c.hook(hookEntered)
	ctl := binary.NativeEndian.Uint64(s.Buf[offCtl:])
	if locked, stale := entered(ctl, e, op.p); locked || stale {
		return false, c.retreat(ctx, s, sub, locked, r)
	}
	if err := ctx.Err(); err != nil {
		return false, c.leaveWith(s, sub, err)
	}
	// 2. Locate.
	cs := candidates(s, sub, op.p, cands)
	x, _, found, err := c.find(c.bg, s, cs, op.p, op.key)
	if errors.Is(err, errRetry) {
		return false, c.leave(s, sub)
	}
	if err != nil {
		c.putBack(s, err)
		return false, c.mapErr(err)
	}
	if op.del && !found {
		return true, c.leave(s, sub)
	}
	target, old := x.addr, x.word
	if !found {
		if target = emptySlot(cs); target == 0 { // the four buckets are full
			return false, c.grow(ctx, s, sub, r)
		}
	}
	if err := ctx.Err(); err != nil {
		return false, c.leaveWith(s, sub, err)
	}
	// 3. Install.
	newWord, won, err := c.install(s, op, sub, ctl, target, old, found)
	if err != nil {
		op.blk = 0 // perhaps reachable: leave it
		c.putBack(s, err)
		return false, err
	}
	if !won {
		r.lost++
		return false, c.leave(s, sub)
	}
	blk := op.blk
	op.blk = 0
	// 4. Dedupe.
	if !found {
		if err := c.dedupe(s, op, sub, ctl, target, newWord, blk, cands); err != nil {
			c.putBack(s, err)
			return false, err
		}
	}
	// 5. Leave.
	if err := c.leave(s, sub); err != nil {
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

// entered reads the control word ctl the entering FETCH_AND_ADD returned:
// locked by a split, or stale (its depth or suffix do not match the
// cached directory entry e: the subtable split since).
func entered(ctl, e uint64, p place) (locked, stale bool) {
	return ctl&ctlLock != 0, ctlDepth(ctl) != dirDepth(e) || p.h&(1<<ctlDepth(ctl)-1) != ctlSuffix(ctl)
}

// retreat leaves a subtable found locked or stale, waits when a split
// holds it (taking the split over when its holder's lease ran out), and
// refreshes the directory.
func (c *Client) retreat(ctx context.Context, s remote.Slot, sub uint64, locked bool, r *retry) error {
	if err := c.leave(s, sub); err != nil {
		return err
	}
	if locked {
		if err := c.expired(ctx, sub); err != nil {
			return err
		}
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
	if err := c.leave(s, sub); err != nil {
		return err
	}
	did, err := c.split(ctx, sub)
	if err != nil {
		return err
	}
	if !did { // another client is splitting it
		if err := c.expired(ctx, sub); err != nil {
			return err
		}
		r.wait()
	}
	return c.refresh(ctx)
}

// writeGuard is a masked CAS that swaps nothing and holds only while the
// control word of sub has the lock clear and the depth and suffix of ctl,
// the word the writer entered on: the CONDITIONAL request after it runs
// only then. A writer that stalled while a split took the subtable (or
// finished with it) thus never CASes a slot of a subtable being copied,
// even once the split stopped waiting for it (lease.go).
func (c *Client) writeGuard(s remote.Slot, sub, ctl uint64) verbs.SendWR {
	return guardWR(s, c.rkey, sub, ^uint64(ctlCount), ctl&^ctlCount&^ctlLock)
}

// guardWR is a masked CAS that swaps nothing: it holds (and the
// CONDITIONAL request after it runs) only while the word at addr, under
// mask, equals want. The word lands at offTest.
func guardWR(s remote.Slot, rkey uint32, addr, mask, want uint64) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, SGL: []verbs.SGE{s.SGE(offTest, 8)}, RemoteAddr: addr, RKey: rkey,
		Atomic: verbs.AtomicArgs{Size: 8, Op: verbs.CmpEqual, Compare: [4]uint64{want}, CompareMask: [4]uint64{mask}}}
}

// install writes op's block out of place and, guarded by the control
// word (writeGuard), CASes the slot at target from old to the block's
// word (to 0 for a DELETE), in one list; an insert (found false) reads
// both combined buckets again in the same list, for dedupe. won false:
// another writer changed the slot first, or the guard failed.
func (c *Client) install(s remote.Slot, op *writeOp, sub, ctl, target, old uint64, found bool) (newWord uint64, won bool, err error) {
	var w [5]verbs.SendWR
	n := 0
	if !op.del {
		putBlock(s.Buf[offNew:], op.key, op.value)
		newWord = mkSlot(op.blk, op.n, op.p.fp)
		w[n] = verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.SGE(offNew, op.n)}, RemoteAddr: op.blk, RKey: c.rkey}
		n++
	}
	w[n] = c.writeGuard(s, sub, ctl)
	w[n+1] = verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagConditional, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: target, RKey: c.rkey}
	w[n+1].Atomic.Compare[0], w[n+1].Atomic.Swap[0] = old, newWord
	binary.NativeEndian.PutUint64(s.Buf[offCAS:], ^old) // what a skipped CAS leaves
	n += 2
	if !found { // an insert: read the buckets again to catch a concurrent insert of the same key
		p := op.p
		w[n] = verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC1, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group1, p.half1)), RKey: c.rkey}
		w[n+1] = verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.SGE(offC2, 2*bucketBytes)}, RemoteAddr: sub + uint64(combinedOff(p.group2, p.half2)), RKey: c.rkey}
		n += 2
	}
	w[n-1].Flags |= verbs.FlagSignaled
	if err := c.do(c.bg, s, w[:n]); err != nil {
		return 0, false, c.mapErr(err)
	}
	return newWord, binary.NativeEndian.Uint64(s.Buf[offCAS:]) == old, nil
}

// dedupe settles a concurrent insert of the same key, from the buckets
// install read again (after its CAS). The copy at the lowest address
// wins: a copy of the key at a lower address makes ours (target, holding
// newWord) go back to 0 — our PUT ordered before theirs; copies at higher
// addresses go, and theirs are ordered before ours. Both writers see the
// two copies or at least the later one does (its read follows both
// CASes), so no duplicate outlives them both. Every CAS is guarded by the
// control word (writeGuard).
func (c *Client) dedupe(s remote.Slot, op *writeOp, sub, ctl, target, newWord, blk uint64, cands []candidate) error {
	for _, y := range candidates(s, sub, op.p, cands) {
		if y.addr == target || y.word == 0 || slotFP(y.word) != op.p.fp {
			continue
		}
		_, dup, err := c.readKey(c.bg, s, y.word, op.key)
		if err != nil && !errors.Is(err, errRetry) {
			return c.mapErr(err)
		}
		if !dup {
			continue
		}
		if y.addr > target { // theirs goes
			if err := c.clearSlot(s, sub, ctl, y.addr, y.word); err != nil {
				return err
			}
			continue
		}
		if err := c.clearSlot(s, sub, ctl, target, newWord); err != nil {
			return err
		}
		if binary.NativeEndian.Uint64(s.Buf[offCAS:]) == newWord {
			c.freeBlock(blk, op.n, true)
		}
		return nil
	}
	return nil
}

// clearSlot CASes the slot at addr from word to 0, guarded by the control
// word the writer entered on; the word found lands at offCAS (its
// complement when the guard failed).
func (c *Client) clearSlot(s remote.Slot, sub, ctl, addr, word uint64) error {
	w := []verbs.SendWR{c.writeGuard(s, sub, ctl),
		{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagConditional | verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: addr, RKey: c.rkey}}
	w[1].Atomic.Compare[0] = word
	binary.NativeEndian.PutUint64(s.Buf[offCAS:], ^word)
	return c.mapErr(c.do(c.bg, s, w))
}

// exit leaves a subtable entered by readBuckets: FETCH_AND_ADD -1 on its
// control word.
func (c *Client) exit(ctx context.Context, s remote.Slot, sub uint64) error {
	w := []verbs.SendWR{{Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{s.SGE(offCAS, 8)}, RemoteAddr: sub, RKey: c.rkey}}
	w[0].Atomic.Swap[0] = ^uint64(0) // -1
	return c.do(ctx, s, w)
}

// leave exits subtable sub (under c.bg: the writer count must go back
// whatever the caller's context says) and gives the slot back.
func (c *Client) leave(s remote.Slot, sub uint64) error {
	err := c.exit(c.bg, s, sub)
	c.putBack(s, err)
	if err != nil { // (MapErr allocates even for nil)
		return c.mapErr(err)
	}
	return nil
}

// leaveWith leaves subtable sub and returns cause (the caller's context
// ended), or leave's own failure.
func (c *Client) leaveWith(s remote.Slot, sub uint64, cause error) error {
	if err := c.leave(s, sub); err != nil {
		return err
	}
	return cause
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
