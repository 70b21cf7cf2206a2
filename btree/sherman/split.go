package sherman

import (
	"bytes"
	"context"
	"slices"

	"github.com/rdmakit/rdmakit/verbs"
)

// Test hooks: a test makes a client stop at one of these points (the
// hook returns an error, the operation returns it holding what it
// holds) to kill it there, or makes other clients act there.
const (
	hookLocked      = "locked"       // a writer holds a leaf's lock
	hookSplitHalf   = "split-half"   // a split wrote both halves, the parent lacks the new one
	hookScanPlanned = "scan-planned" // a scan chose its run of leaves and has not read them
)

// testHook, when set (by tests only, before clients start), is called
// at each hook point.
var testHook func(point string) error

func hook(point string) error {
	if h := testHook; h != nil {
		return h(point)
	}
	return nil
}

// splitLeaf splits the full leaf n (p, locked by h) while inserting key:
// the upper half of the entries goes to a new right sibling, written
// first; then the left half is rewritten whole (a new node version)
// with the high fence lowered to the separator and the sibling pointer
// to the new node, and unlocked in the same list. From then on readers
// find every key (B-link: past the high fence, follow the sibling);
// adding the separator to the parent only makes the way shorter.
func (c *Client) splitLeaf(ctx context.Context, s *slot, h held, n *node, key, value []byte) error {
	all := append(cloneEntries(n.ents), entry{key: bytes.Clone(key), val: bytes.Clone(value)})
	slices.SortFunc(all, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	mid := len(all) / 2
	sep := all[mid].key
	np, err := c.allocNode(s)
	if err != nil {
		c.unlock(s, h, nil)
		return err
	}
	right := &node{ver: 1, hasLow: true, low: sep, hasHigh: n.hasHigh, high: bytes.Clone(n.high), sibling: n.sibling, ents: slot0(all[mid:])}
	left := &node{ver: n.ver + 1, hasLow: n.hasLow, low: bytes.Clone(n.low), hasHigh: true, high: sep, sibling: np, ents: slot0(all[:mid])}
	if err := c.writeHalves(s, h, np, left, right); err != nil {
		return err
	}
	c.splits.Add(1)
	if err := hook(hookSplitHalf); err != nil {
		return err
	}
	// The key is in (the write took effect); the separator only
	// shortens the way to it, and a tree that fails to take it (full,
	// unreachable) stays correct through the sibling pointer.
	if err := c.insertParent(ctx, s, 1, sep, np); err != nil {
		c.cfg.Logger.Warn("sherman: a split's separator did not reach the parent", "err", err)
	}
	return nil
}

// slot0 numbers entries' slots from 0.
func slot0(es []entry) []entry {
	for i := range es {
		es[i].slot = i
	}
	return es
}

// writeHalves writes a split's new right node np, then the rewritten
// left node (locked by h) with its unlock: one list when both live on
// the same memory node (RC order), else the right node first.
func (c *Client) writeHalves(s *slot, h held, np uint64, left, right *node) error {
	c.g.encode(s.buf[c.offNode2:c.offNode2+c.g.size], right)
	c.g.encode(s.buf[c.offNode:c.offNode+c.g.size], left)
	rw := c.nodeWrite(s, np, c.offNode2)
	if ptrNode(np) != ptrNode(h.p) {
		s.list = append(s.list[:0], rw)
		if err := c.ops.do(c.bg, s, ptrNode(np), s.list); err != nil {
			c.unlock(s, h, nil)
			return err
		}
		return c.unlock(s, h, []verbs.SendWR{c.nodeWrite(s, h.p, c.offNode)})
	}
	return c.unlock(s, h, []verbs.SendWR{rw, c.nodeWrite(s, h.p, c.offNode)})
}

// insertParent adds separator key → child (a node of level-1 split off
// its left neighbour) to the node of the given level whose range holds
// key, splitting that node in turn when it is full, or grows the tree
// when level-1 is the root's level. It is idempotent: a separator
// already there is left as it is.
func (c *Client) insertParent(ctx context.Context, s *slot, level int, key []byte, child uint64) error {
	for {
		rp, err := c.rootWord(c.bg, s)
		if err != nil {
			return err
		}
		root, err := c.readCopy(c.bg, s, rp)
		if err != nil {
			return err
		}
		if root.level < level {
			grown, err := c.growRoot(s, rp, root)
			if err != nil || grown {
				return err
			}
			continue // another client grew it first
		}
		p, err := c.descend(s, rp, root, key, level)
		if err != nil {
			return err
		}
		next, nkey, nchild, err := c.insertInner(ctx, s, p, key, child)
		if err != nil || next == 0 {
			return err
		}
		level, key, child = level+1, nkey, nchild
	}
}

// descend finds the node of the given level whose range holds key,
// reading fresh from the root rp.
func (c *Client) descend(s *slot, rp uint64, n *node, key []byte, level int) (uint64, error) {
	p := rp
	for n.level > level || n.past(key) && n.sibling != 0 {
		if n.past(key) && n.sibling != 0 {
			p = n.sibling
		} else {
			p = n.child(key)
		}
		var err error
		if n, err = c.readCopy(c.bg, s, p); err != nil {
			return 0, err
		}
	}
	return p, nil
}

// insertInner locks internal node p (moving right while key is past it)
// and inserts key → child. When p is full it splits: next is then the
// level above, and nkey → nchild the separator to insert there.
func (c *Client) insertInner(ctx context.Context, s *slot, p uint64, key []byte, child uint64) (next uint64, nkey []byte, nchild uint64, err error) {
	for {
		h, err := c.lock(ctx, s, p)
		if err != nil {
			return 0, nil, 0, err
		}
		n, err := c.readCopy(c.bg, s, p)
		if err != nil {
			c.unlock(s, h, nil)
			return 0, nil, 0, err
		}
		if n.past(key) && n.sibling != 0 {
			if err := c.unlock(s, h, nil); err != nil {
				return 0, nil, 0, err
			}
			p = n.sibling
			continue
		}
		i, found := slices.BinarySearchFunc(n.keys, key, bytes.Compare)
		if found {
			return 0, nil, 0, c.unlock(s, h, nil)
		}
		n.keys = slices.Insert(n.keys, i, bytes.Clone(key))
		n.kids = slices.Insert(n.kids, i, child)
		n.ver++
		if len(n.keys) <= c.g.InnerSlots {
			c.g.encode(s.buf[c.offNode:c.offNode+c.g.size], n)
			if err := c.unlock(s, h, []verbs.SendWR{c.nodeWrite(s, p, c.offNode)}); err != nil {
				return 0, nil, 0, err
			}
			c.cache.put(p, n)
			return 0, nil, 0, nil
		}
		mid := len(n.keys) / 2
		sep := n.keys[mid]
		np, err := c.allocNode(s)
		if err != nil {
			c.unlock(s, h, nil)
			return 0, nil, 0, err
		}
		right := &node{ver: 1, level: n.level, hasLow: true, low: sep, hasHigh: n.hasHigh, high: n.high, sibling: n.sibling,
			leftmost: n.kids[mid], keys: n.keys[mid+1:], kids: n.kids[mid+1:]}
		left := &node{ver: n.ver, level: n.level, hasLow: n.hasLow, low: n.low, hasHigh: true, high: sep, sibling: np,
			keys: n.keys[:mid], kids: n.kids[:mid], leftmost: n.leftmost}
		if err := c.writeHalves(s, h, np, left, right); err != nil {
			return 0, nil, 0, err
		}
		c.splits.Add(1)
		c.cache.put(p, left)
		c.cache.put(np, right)
		return 1, sep, np, nil
	}
}

// growRoot puts a new root above the root rp (whose level has split):
// its children are rp and the siblings to its right (as many as fit;
// the rest stay reachable through sibling pointers), and a CAS of the
// root word installs it. false: the root word changed first (another
// client grew the tree).
func (c *Client) growRoot(s *slot, rp uint64, root *node) (bool, error) {
	nr := &node{ver: 1, level: root.level + 1, leftmost: rp}
	for n := root; n.sibling != 0 && len(nr.keys) < c.g.InnerSlots; {
		sib := n.sibling
		var err error
		if n, err = c.readCopy(c.bg, s, sib); err != nil {
			return false, err
		}
		nr.keys, nr.kids = append(nr.keys, n.low), append(nr.kids, sib)
	}
	np, err := c.allocNode(s)
	if err != nil {
		return false, err
	}
	c.g.encode(s.buf[c.offNode:c.offNode+c.g.size], nr)
	old := rp
	if rp == firstRoot {
		old = 0
	}
	s.list = append(s.list[:0], c.nodeWrite(s, np, c.offNode))
	if ptrNode(np) != 0 {
		if err := c.ops.do(c.bg, s, ptrNode(np), s.list); err != nil {
			return false, err
		}
		s.list = s.list[:0]
	}
	s.list = append(s.list, maskedCAS(s, offWord, c.rkey(0), c.conns[0].Region.Addr+offRoot, old, np, ^uint64(0)))
	if err := c.ops.do(c.bg, s, 0, s.list); err != nil {
		return false, err
	}
	if u64(s.buf[offWord:]) != old {
		return false, nil
	}
	c.root.Store(np)
	c.cache.put(np, nr)
	return true, nil
}
