package sherman

import (
	"bytes"
	"context"
	"errors"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/verbs"
)

// Put implements btree.Tree.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := btree.Check(key, value, c.g.KeySize, c.g.ValueSize); err != nil {
		return err
	}
	return c.write(ctx, key, value, false)
}

// Delete implements btree.Tree. The entry's slot becomes free; leaves
// are never merged, so deletes can leave them under-full.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := btree.Check(key, nil, c.g.KeySize, c.g.ValueSize); err != nil {
		return err
	}
	return c.write(ctx, key, nil, true)
}

// write runs a Put or Delete, again from the start when its lock was
// taken over under it (it was too slow: nothing it wrote took effect).
func (c *Client) write(ctx context.Context, key, value []byte, del bool) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	s, err := c.ops.acquire(ctx)
	if err != nil {
		return err
	}
	for {
		err = c.writeOnce(ctx, s, key, value, del)
		if !errors.Is(err, errLease) {
			break
		}
	}
	c.putBack(s, err)
	return err
}

// writeOnce: find the leaf, lock it, read it under the lock, and write
// back the one entry that changes with the unlock in the same list — or
// split the leaf when it has no free slot.
func (c *Client) writeOnce(ctx context.Context, s *slot, key, value []byte, del bool) error {
	p, path, err := c.leafFor(ctx, s, key, false)
	if err != nil {
		return err
	}
	for {
		h, err := c.lock(ctx, s, p)
		if err != nil {
			return err
		}
		n, err := c.readNode(c.bg, s, p, c.offNode)
		if err != nil {
			c.unlock(s, h, nil)
			return err
		}
		if err := hook(hookLocked); err != nil {
			return err // a test's death: the lock stays held
		}
		if n.level != 0 || !n.covers(key) {
			if err := c.unlock(s, h, nil); err != nil {
				return err
			}
			if p, path, err = c.stale(ctx, s, n, key, path); err != nil {
				return err
			}
			continue
		}
		e := n.find(key)
		switch {
		case e != nil && del:
			return c.unlock(s, h, c.entryWrite(s, p, n, entry{slot: e.slot, ver: e.ver + 1}))
		case del:
			return c.unlock(s, h, nil)
		case e != nil:
			return c.unlock(s, h, c.entryWrite(s, p, n, entry{slot: e.slot, ver: e.ver + 1, key: key, val: value}))
		case len(n.free) > 0:
			i := n.free[0]
			old, _ := c.g.decodeEntry(c.g.slot(s.buf[c.offNode:], i), uint32(n.ver))
			return c.unlock(s, h, c.entryWrite(s, p, n, entry{slot: i, ver: old.ver + 1, key: key, val: value}))
		}
		return c.splitLeaf(ctx, s, h, n, key, value)
	}
}

// entryWrite is the WRITE of one leaf entry (and its version pair) of
// node p: Sherman's entry-level write-back.
func (c *Client) entryWrite(s *slot, p uint64, n *node, e entry) []verbs.SendWR {
	b := s.buf[offEntry : offEntry+c.g.leafEnt]
	c.g.encodeEntry(b, e, n.ver)
	return []verbs.SendWR{{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.sge(offEntry, c.g.leafEnt)},
		RemoteAddr: c.nodeAddr(p) + uint64(c.g.head+e.slot*c.g.leafEnt), RKey: c.rkey(ptrNode(p))}}
}

// nodeWrite is the WRITE of a whole node from the slot's buffer at off.
func (c *Client) nodeWrite(s *slot, p uint64, off int) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{s.sge(off, c.g.size)},
		RemoteAddr: c.nodeAddr(p), RKey: c.rkey(ptrNode(p))}
}

// cloneEntries copies a node's entries out of the slot's buffer.
func cloneEntries(es []entry) []entry {
	out := make([]entry, len(es))
	for i, e := range es {
		out[i] = entry{key: bytes.Clone(e.key), val: bytes.Clone(e.val)}
	}
	return out
}
