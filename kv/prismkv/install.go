package prismkv

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
)

// Put implements kv.Store.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	return c.install(ctx, key, value, false)
}

// Delete implements kv.Store: the key's slot is freed (it points to the
// free item) and its item returned.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := kv.Check(key, nil); err != nil {
		return err
	}
	return c.install(ctx, key, nil, true)
}

// maxLost bounds the CASes an operation may lose in a row.
const maxLost = 1 << 16

// install puts key's new item (del: the free item) in the key's slot by
// the ALLOCATE → WRITE → key check → CONDITIONAL CAS chain, retrying with
// the slot's current value when another writer of the key got there
// first. A PUT that looks its key up tries to take the key's segment
// lock in the same list: if the key has no slot, it takes one under the
// lock (claim); if it has, the install list releases the lock.
func (c *Client) install(ctx context.Context, key, value []byte, del bool) error {
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
	if !del {
		putItem(s.Buf[offNew:], key, value, 0)
	}
	h := kv.Hash(key)
	seg := segment(int(h % uint64(c.nslots)))
	ch := change{n: n, del: del, check: key, seg: -1}
	known := false
	if e, ok := c.cache.lookup(h); ok {
		ch.slot, ch.oldP, ch.oldN, known = e.slot, e.ptr, e.n, true // skip the lookup: a wrong guess fails the CAS, which tells the truth
		c.hits.Add(1)
	}
	for lost := 0; ; lost++ {
		if lost > maxLost {
			c.ops.Release(s)
			return fmt.Errorf("%w: %d lost races in a row", kv.ErrUnreachable, lost)
		}
		if !known {
			var lt *lockTry
			if !del {
				lt = c.newLockTry(seg)
			}
			f, err := c.find(ctx, s, key, true, lt, !del)
			if err != nil {
				if lt != nil {
					// Its lock CAS may have run: release what it may hold.
					c.unlock(lt.seg, lt.token)
				}
				return c.mapErr(err) // the slot is not ours any more
			}
			switch {
			case f.exists:
				ch.slot, ch.oldP, ch.oldN, known = f.slot, f.ptr, f.n, true
				if lt != nil && lt.got {
					ch.seg, ch.token = seg, lt.token // released by the install list
				}
			case del:
				c.ops.Release(s)
				return nil // deleting a key that has no value
			default:
				return c.claim(ctx, s, key, h, n, f, lt)
			}
		}
		r, err := c.run(ctx, s, ch)
		if err != nil {
			if ch.seg >= 0 {
				c.unlock(ch.seg, ch.token)
			}
			return c.mapErr(err)
		}
		if r.installed {
			c.took(s, key, h, ch, r)
			return nil
		}
		c.lost(ch, r)
		ch.seg = -1
		if !r.keyOK || r.curP == c.empty || r.curP == c.free {
			// The slot no longer holds this key: look again.
			c.cache.forget(h)
			known = false
			continue
		}
		// The slot holds another version of this key: install over it.
		ch.oldP, ch.oldN = r.curP, r.curN
	}
}

// took finishes an install that took: the slot cache learns the slot's
// new value, the replaced item goes back to the node, s is released.
func (c *Client) took(s remote.Slot, key []byte, h uint64, ch change, r changed) {
	if ch.del {
		c.cache.forget(h)
	} else {
		c.cache.remember(h, cached{slot: ch.slot, ptr: r.newP, n: uint64(ch.n)})
	}
	if ch.oldP != c.empty && ch.oldP != c.free {
		c.giveBack(ch.oldP, ch.oldN)
	}
	c.ops.Release(s)
}

// lost gives back the buffer of a list whose CAS did not take: it was
// never reachable.
func (c *Client) lost(ch change, r changed) {
	if !ch.del {
		c.giveBack(r.newP, uint64(ch.n))
	}
}

// claim inserts key, which had no slot when looked up (f, with lt's try
// at the lock of its home segment). Holding the lock, it takes the first
// free or empty slot of the key's probe sequence, its CAS and the lock's
// release in one list; without it, it waits for the lock and looks the
// key up again (another inserter may have put it meanwhile).
func (c *Client) claim(ctx context.Context, s remote.Slot, key []byte, h uint64, n int, f found, lt *lockTry) error {
	for lost := 0; ; lost++ {
		if lost > maxLost {
			c.ops.Release(s)
			return fmt.Errorf("%w: %d lost races in a row", kv.ErrUnreachable, lost)
		}
		if !lt.got {
			var err error
			if f, err = c.findLocked(ctx, s, key, lt); err != nil {
				c.unlock(lt.seg, lt.token) // as in install
				return c.mapErr(err)
			}
		}
		ch := change{n: n, seg: lt.seg, token: lt.token}
		switch {
		case f.exists:
			ch.slot, ch.oldP, ch.oldN, ch.check = f.slot, f.ptr, f.n, key
		case f.take < 0:
			c.unlock(lt.seg, lt.token)
			c.ops.Release(s)
			return fmt.Errorf("%w: all %d slots hold other keys", kv.ErrFull, c.nslots)
		default:
			ch.slot, ch.oldP, ch.oldN = f.take, f.takeP, itemHead
			if f.takeD > max(f.dist, 0) {
				ch.raise = f.takeD
			}
		}
		hook(hookLocked)
		r, err := c.run(ctx, s, ch)
		if err != nil {
			c.unlock(lt.seg, lt.token)
			return c.mapErr(err)
		}
		if r.installed {
			c.took(s, key, h, ch, r)
			return nil
		}
		c.lost(ch, r) // another key took the slot, or the lease ran out: again
		lt = c.newLockTry(lt.seg)
	}
}
