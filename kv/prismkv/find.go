package prismkv

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// bulk is the slots whose values a probe read in bulk (one READ of the
// slots after the probed one, up to bulkSlots, into s.Buf[offPairs:]):
// the slots among them that are free are passed, and one that is empty
// ends the sequence, without a round trip.
// dist is the node's distance word, read in the same list.
type bulk struct{ first, n, dist int }

// ptr is slot b's item address, if b is among the slots read.
func (k bulk) ptr(s remote.Slot, b int) (uint64, bool) {
	if b < k.first || b >= k.first+k.n {
		return 0, false
	}
	return binary.NativeEndian.Uint64(s.Buf[offPairs+(b-k.first)*slotSize:]), true
}

// probe reads, through slot i, its item, and with withSlot also the
// slot's 16-byte value (which a PUT's CAS compares with; a GET does not
// need it); with more, also the values of the slots after i, in bulk;
// with lt, it first tries to take a segment lock. It returns the item's
// bytes (in s.Buf) and the slot value.
func (c *Client) probe(ctx context.Context, s remote.Slot, i int, withSlot, more bool, lt *lockTry) (item []byte, ptr, n uint64, k bulk, err error) {
	wrs, sgl := s.List(5) // the slot's own: a list here would escape
	w := 0
	if lt != nil {
		sgl[w] = s.SGE(offLock, 8)
		wrs[w] = lt.wr(c, sgl[w:w+1])
		w++
	}
	if withSlot {
		sgl[w] = s.SGE(offSlot, slotSize)
		wrs[w] = verbs.SendWR{Opcode: verbs.OpRead, SGL: sgl[w : w+1], RemoteAddr: c.slotAddr(i), RKey: c.rkey}
		w++
	}
	if more {
		k = bulk{first: i + 1, n: min(bulkSlots, c.nslots-i-1)} // to the table's end; the next lap starts a new read
		if k.n > 0 {
			sgl[w] = s.SGE(offPairs, k.n*slotSize)
			wrs[w] = verbs.SendWR{Opcode: verbs.OpRead, SGL: sgl[w : w+1], RemoteAddr: c.slotAddr(k.first), RKey: c.rkey}
			w++
		}
		sgl[w] = s.SGE(offDist, 8)
		wrs[w] = verbs.SendWR{Opcode: verbs.OpRead, SGL: sgl[w : w+1], RemoteAddr: c.dist, RKey: c.rkey}
		w++
	}
	wrs[w].SGL = sgl[w:w] // IndirectRead fills it in place
	prism.IndirectRead(wrs[w:], 0, s.SGE(offItem, maxItem), c.rkey, c.slotAddr(i), true)
	wc, err := c.ops.Do(ctx, s, wrs[:w+1])
	if err != nil {
		return nil, 0, 0, bulk{}, err
	}
	if wc.Status != verbs.StatusSuccess {
		return nil, 0, 0, bulk{}, fmt.Errorf("%w: indirect READ: %w", kv.ErrUnreachable, wc.Status.Err())
	}
	if withSlot {
		ptr, n = binary.NativeEndian.Uint64(s.Buf[offSlot:]), binary.NativeEndian.Uint64(s.Buf[offSlot+8:])
	}
	if lt != nil {
		lt.result(binary.NativeEndian.Uint64(s.Buf[offLock:]))
	}
	if more {
		k.dist = int(min(binary.NativeEndian.Uint64(s.Buf[offDist:]), uint64(c.nslots)))
	}
	return s.Buf[offItem : offItem+int(wc.ByteLen)], ptr, n, k, nil
}

// found is what find learned of a key: its slot with the slot's value
// and the item's value, or, when the key has no slot, the first slot of
// its probe sequence that could take it (free, or the empty slot that
// ends the sequence; -1 when there is none).
type found struct {
	slot   int
	ptr, n uint64
	exists bool
	value  []byte // in the operation's buffer
	take   int    // without exists: a free or empty slot
	takeP  uint64 // its item: c.free or c.empty
	takeD  int    // its distance from the home slot
	dist   int    // the node's distance word as read (-1: not read)
}

// find locates key's slot. A probe sequence starts at the key's home
// slot, passes slots holding other keys and free slots, and ends at an
// empty slot or past the node's distance word (read with the second
// probe) — with take, not before it has seen a slot to take. Without
// withSlot (a GET) the slot values are not read. With lt, its first list
// tries to take a lock first: when it does, the whole lookup runs under
// the lock. An error other than a failed READ's status leaves s no
// longer the caller's.
func (c *Client) find(ctx context.Context, s remote.Slot, key []byte, withSlot bool, lt *lockTry, take bool) (found, error) {
	h := kv.Hash(key)
	start := int(h % uint64(c.nslots))
	if e, ok := c.cache.lookup(h); ok {
		item, ptr, n, _, err := c.probe(ctx, s, e.slot, withSlot, false, lt)
		lt = nil
		if err != nil {
			return found{}, err
		}
		if k, v, fl, ok := readItem(item); ok && fl&(flagEmpty|flagFree) == 0 && bytes.Equal(k, key) {
			c.hits.Add(1)
			return found{slot: e.slot, ptr: ptr, n: n, exists: true, value: v}, nil
		}
		c.cache.forget(h) // stale
	}
	c.lookups.Add(1)
	f := found{slot: -1, take: -1, dist: -1}
	var k bulk
	rereads := 0
	limit := c.nslots
	for i := 0; i < c.nslots && (i < limit || take && f.take < 0); i++ {
		b := (start + i) % c.nslots
		if p, ok := k.ptr(s, b); ok && p == c.free {
			f.mayTake(b, c.free, i)
			continue
		} else if ok && p == c.empty { // a slot never empty again: the sequence ends here
			f.mayTake(b, c.empty, i)
			return f, nil
		}
		item, ptr, n, nk, err := c.probe(ctx, s, b, withSlot, i > 0, lt)
		lt = nil
		if err != nil {
			return found{}, err
		}
		if i > 0 {
			k, f.dist = nk, nk.dist
			limit = nk.dist + 1
		}
		key2, v, fl, ok := readItem(item)
		switch {
		case !ok:
			// A bounded READ returns exactly the item the slot points
			// to, so this is a corrupt item: read once more, then fail.
			if rereads++; rereads > 3 {
				c.ops.Release(s)
				return found{}, fmt.Errorf("%w: slot %d points to a malformed item", kv.ErrUnreachable, b)
			}
			i--
		case fl&flagEmpty != 0:
			f.mayTake(b, c.empty, i)
			return f, nil
		case fl&flagFree != 0:
			f.mayTake(b, c.free, i)
		case fl&flagTomb == 0 && bytes.Equal(key2, key):
			if withSlot {
				c.cache.remember(h, cached{slot: b, ptr: ptr, n: n})
			} else if b != start {
				// A key away from its home slot: the next GET goes
				// straight there. (Its value is unknown: a PUT guesses, and
				// its CAS tells the value.) A key at home needs no entry.
				c.cache.remember(h, cached{slot: b})
			}
			return found{slot: b, ptr: ptr, n: n, exists: true, value: v}, nil
		}
	}
	return f, nil
}

// mayTake notes slot b (pointing to item, i slots from the home slot)
// as the one to take, if it is the first seen.
func (f *found) mayTake(b int, item uint64, i int) {
	if f.take < 0 {
		f.take, f.takeP, f.takeD = b, item, i
	}
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
	f, err := c.find(ctx, s, key, false, nil, false)
	if err != nil {
		return dst, c.mapErr(err) // the slot is not ours any more
	}
	defer c.ops.Release(s)
	if !f.exists {
		return dst, kv.ErrNotFound
	}
	return append(dst, f.value...), nil
}
