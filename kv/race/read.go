package race

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// Reading the table: a key's two combined buckets, its candidate slots,
// and the blocks they point to; GET is built from these.

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

// get is RACE's GET: the speculative read of a cached slot (Smart-HT)
// when there is one, else READ both combined buckets (one list) and the
// block of each slot whose fingerprint matches. A miss re-reads the cached
// directory entry and the global depth (one list): when a split changed
// them, the client refreshes its directory and looks again; else the key
// is not there. A block whose CRC fails (torn, or reused) is read again.
func (c *Client) get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if v, ok := c.cfg.Cache.get(c, ctx, key, dst); ok {
		return v, nil
	}
	return c.getFull(ctx, key, dst)
}

// getFull is get after a first speculative read failed (or there is no
// cache). Apart from get, as its candidates escape to the heap: a cache
// hit allocates nothing.
func (c *Client) getFull(ctx context.Context, key, dst []byte) ([]byte, error) {
	p := placeOf(key)
	var cands [4 * bucketSlots]candidate
	for attempt := 0; ; attempt++ {
		if attempt > 1000 {
			return dst, fmt.Errorf("%w: GET kept finding a changing table", kv.ErrUnreachable)
		}
		if attempt > 0 {
			if v, ok := c.cfg.Cache.get(c, ctx, key, dst); ok {
				return v, nil
			}
		}
		d, i, e := c.entry(p.h)
		s, err := c.ops.Acquire(ctx)
		if err != nil {
			return dst, c.mapErr(err)
		}
		if err := c.readBuckets(ctx, s, dirAddr(e), p, false); err != nil {
			c.putBack(s, err)
			return dst, c.mapErr(err)
		}
		cs := candidates(s, dirAddr(e), p, cands[:0])
		x, v, ok, err := c.find(ctx, s, cs, p, key)
		if errors.Is(err, errRetry) {
			c.ops.Release(s)
			continue
		}
		if err != nil {
			c.putBack(s, err)
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
			c.putBack(s, err)
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
