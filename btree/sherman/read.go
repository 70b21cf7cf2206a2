package sherman

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/verbs"
)

// maxTorn bounds the re-reads of a node that keeps reading torn: past
// it the bytes are not a node (a bad pointer), not a write under way.
const maxTorn = 1000

// readNode READs node p into the slot's buffer at off and decodes it,
// reading again while it is torn (a writer is mid-way). The node
// aliases the buffer.
func (c *Client) readNode(ctx context.Context, s *slot, p uint64, off int) (*node, error) {
	n := new(node)
	if err := c.readInto(ctx, s, p, off, n); err != nil {
		return nil, err
	}
	return n, nil
}

// readInto is readNode decoding into n (the slot's scratch node on the
// read paths, which then allocate nothing).
func (c *Client) readInto(ctx context.Context, s *slot, p uint64, off int, n *node) error {
	if !c.valid(p) {
		return fmt.Errorf("%w: sherman: pointer %#x outside the tree", btree.ErrLayout, p)
	}
	for try := 0; ; try++ {
		s.list = append(s.list[:0], c.readWR(s, 0, p, off))
		if err := c.ops.do(ctx, s, ptrNode(p), s.list); err != nil {
			return err
		}
		err := c.g.decodeInto(n, s.buf[off:off+c.g.size])
		if err == nil {
			return nil
		}
		if try == maxTorn {
			return fmt.Errorf("%w: sherman: node %#x never reads whole: %w", btree.ErrLayout, p, err)
		}
		if err := pause(ctx, try); err != nil {
			return err
		}
	}
}

// readWR is the READ of node p into the slot's buffer at off, its SGE
// the slot's i-th.
func (c *Client) readWR(s *slot, i int, p uint64, off int) verbs.SendWR {
	s.sgl[i] = s.sge(off, c.g.size)
	return verbs.SendWR{Opcode: verbs.OpRead, SGL: s.sgl[i : i+1 : i+1], RemoteAddr: c.nodeAddr(p), RKey: c.rkey(ptrNode(p))}
}

// readCopy reads node p and returns a copy that owns its bytes.
func (c *Client) readCopy(ctx context.Context, s *slot, p uint64) (*node, error) {
	if _, err := c.readNode(ctx, s, p, c.offNode2); err != nil {
		return nil, err
	}
	return c.g.decode(bytes.Clone(s.buf[c.offNode2 : c.offNode2+c.g.size]))
}

// rootWord reads the root pointer from memory node 0.
func (c *Client) rootWord(ctx context.Context, s *slot) (uint64, error) {
	w := verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{s.sge(offWord, 8)}, RemoteAddr: c.conns[0].Region.Addr + offRoot, RKey: c.rkey(0)}
	s.list = append(s.list[:0], w)
	if err := c.ops.do(ctx, s, 0, s.list); err != nil {
		return 0, err
	}
	p := u64(s.buf[offWord:])
	if p == 0 {
		p = firstRoot
	}
	return p, nil
}

// rootPtr is the root as the client last saw it.
func (c *Client) rootPtr(ctx context.Context, s *slot) (uint64, error) {
	if p := c.root.Load(); p != 0 {
		return p, nil
	}
	p, err := c.rootWord(ctx, s)
	if err != nil {
		return 0, err
	}
	c.root.Store(p)
	return p, nil
}

// leafFor finds the leaf that should hold key: down from the root
// through internal nodes, taken from the cache when there (fresh: read
// them all). It returns the leaf and the internal nodes it passed (to
// drop from the cache when the leaf turns out stale; the slice is the
// slot's until its next leafFor).
func (c *Client) leafFor(ctx context.Context, s *slot, key []byte, fresh bool) (uint64, []uint64, error) {
	p, _, path, err := c.leafParent(ctx, s, key, fresh)
	return p, path, err
}

// leafParent is leafFor that also returns the level-1 node it took the
// leaf from (a cached copy; nil when the root is a leaf).
func (c *Client) leafParent(ctx context.Context, s *slot, key []byte, fresh bool) (uint64, *node, []uint64, error) {
	if fresh {
		c.root.Store(0)
	}
	p, err := c.rootPtr(ctx, s)
	if err != nil {
		return 0, nil, nil, err
	}
	root := p
	path := s.path[:0]
	for {
		var n *node
		if !fresh {
			n = c.cache.get(p)
		}
		if n == nil {
			if n, err = c.readCopy(ctx, s, p); err != nil {
				return 0, nil, nil, err
			}
			if n.level == 0 {
				return p, nil, path, nil
			}
			if p == root && n.sibling != 0 {
				c.root.Store(0) // the root split: read the root word next time
			}
			c.cache.put(p, n)
		}
		path = append(path, p)
		if n.past(key) && n.sibling != 0 {
			c.hops.Add(1)
			c.cache.drop(p)
			p = n.sibling
			continue
		}
		if n.level == 1 {
			return n.child(key), n, path, nil
		}
		p = n.child(key)
	}
}

// stale handles a leaf that does not cover key (reached through cached
// nodes on path): past its high fence, follow its sibling; else (a key
// below the low fence or a node that is not a leaf: never in a tree
// without merges, but cheap to survive) find the leaf again from the
// root without the cache.
func (c *Client) stale(ctx context.Context, s *slot, n *node, key []byte, path []uint64) (uint64, []uint64, error) {
	c.cache.drop(path...)
	if len(path) > 0 && path[0] == c.root.Load() {
		c.root.Store(0)
	}
	if n.level == 0 && n.past(key) && n.sibling != 0 {
		c.hops.Add(1)
		return n.sibling, nil, nil
	}
	return c.leafFor(ctx, s, key, true)
}

// Get implements btree.Tree.
func (c *Client) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := btree.Check(key, nil, c.g.KeySize, c.g.ValueSize); err != nil {
		return dst, err
	}
	if err := c.enter(); err != nil {
		return dst, err
	}
	defer c.leave()
	s, err := c.ops.acquire(ctx)
	if err != nil {
		return dst, err
	}
	if c.spec != nil {
		var ok bool
		if dst, ok, err = c.specGet(ctx, s, key, dst); ok || err != nil {
			c.putBack(s, err)
			return dst, err
		}
	}
	p, path, err := c.leafFor(ctx, s, key, false)
	for err == nil {
		n := &s.leaf
		if err = c.readInto(ctx, s, p, c.offNode, n); err != nil {
			break
		}
		if n.level != 0 || !n.covers(key) {
			p, path, err = c.stale(ctx, s, n, key, path)
			continue
		}
		e := n.find(key)
		if c.spec != nil {
			c.specLearn(key, p, n, e)
		}
		if e == nil {
			c.ops.release(s)
			return dst, btree.ErrNotFound
		}
		dst = append(dst, e.val...) // before the slot's buffer goes to another operation
		c.ops.release(s)
		return dst, nil
	}
	c.putBack(s, err)
	return dst, err
}

// putBack releases slot s after an operation failed with err, unless a
// list was left in flight (the issuer then releases it when it
// completes).
func (c *Client) putBack(s *slot, err error) {
	if !errors.Is(err, errInFlight) {
		c.ops.release(s)
	}
}
