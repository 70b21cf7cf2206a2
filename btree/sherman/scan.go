package sherman

import (
	"bytes"
	"context"
	"slices"

	"github.com/rdmakit/rdmakit/btree"
)

// maxRun bounds the leaves a scan READs in one list (smart.MaxBatch: a
// Smart-BT task's list holds at most 16 requests), and runBytes the
// slot buffer they take (fewer leaves when nodes are large).
const (
	maxRun   = 16
	runBytes = 64 << 10
)

// Scan implements btree.Tree. The iterator reads leaves in runs: the
// cached level-1 node over the cursor names the leaf that covers it
// and the leaves to its right (as many as the limit and the leaf
// capacity call for, those that start below to, on the same memory
// node), and their READs go out in one list — one round trip. Each
// leaf of a run is taken only when it is whole and consistent (node
// and entry versions agree, as readNode checks) and a leaf: the first
// must cover the cursor (else the run is dropped and the stale leaf
// handled as Get does — sibling hop or fresh descent), and each next
// one must have as its low fence exactly its predecessor's high fence;
// the run stops at the first that does not (a leaf split since the
// level-1 copy was cached, a torn read), and the next run starts from
// the last taken leaf's high fence and sibling pointer. The keys of
// each taken leaf in [cursor, min(to, high fence)) are returned sorted
// and the cursor moves to that high fence.
//
// Why a key present for the whole scan is returned once, in order:
// nodes split but never merge, and a node's low fence never changes
// (a split lowers the high fence of the node it splits and gives the
// new node the separator as its low fence), so at every moment the
// leaves' ranges [low, high) partition the key space and a whole read
// of a leaf holds every key present in its range at the time of the
// read. The leaves a scan takes have ranges that chain: the first
// covers the cursor, each next one starts at its predecessor's high
// fence (within a run by the low-fence check, across runs because the
// next run's first leaf must cover the cursor, which is that fence).
// Their ranges, cut to [from, to), are therefore disjoint, ascending
// and without gaps — whatever the order and times of the READs, which
// is why a run's READs may all go out at once. A present key lies in
// exactly one of them and is returned from that leaf's read, once; the
// keys come out in order because each leaf's are sorted and the ranges
// ascend.
func (c *Client) Scan(ctx context.Context, from, to []byte, limit int) btree.Iterator {
	it := &iterator{c: c, ctx: ctx, cursor: bytes.Clone(from), to: bytes.Clone(to), limit: limit}
	if len(from) > c.g.KeySize || len(to) > c.g.KeySize {
		it.err, it.done = btree.ErrTooLarge, true
	}
	return it
}

// iterator is a Scan under way.
type iterator struct {
	c      *Client
	ctx    context.Context
	cursor []byte // the next key to return is ≥ cursor (nil: −∞)
	to     []byte
	limit  int
	n      int    // keys returned
	next   uint64 // the leaf that starts at cursor, when known
	buf    []entry
	arena  []byte // the keys and values of buf
	i      int
	done   bool
	err    error
	run    []uint64 // the leaves of the run being read
	leaves []node   // their decoded nodes (reused)
}

// Next implements btree.Iterator.
func (it *iterator) Next() bool {
	for {
		if it.limit > 0 && it.n >= it.limit {
			return false
		}
		if it.i+1 < len(it.buf) {
			it.i++
			it.n++
			return true
		}
		if it.done {
			return false
		}
		if err := it.fill(); err != nil {
			it.err, it.done = err, true
			return false
		}
	}
}

// fill reads the run of leaves at the cursor into buf.
func (it *iterator) fill() error {
	c := it.c
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	s, err := c.ops.acquire(it.ctx)
	if err != nil {
		return err
	}
	err = it.fillWith(s)
	c.putBack(s, err)
	return err
}

func (it *iterator) fillWith(s *slot) error {
	c := it.c
	key := it.cursor
	if key == nil {
		key = []byte{} // −∞: compares below every key
	}
	p, parent, path, err := c.leafParent(it.ctx, s, key, false)
	if err != nil {
		return err
	}
	if it.next != 0 && p != it.next {
		// The cached level-1 copy lacks the leaf the last one's sibling
		// pointer names (a split it does not know): read that leaf alone,
		// and drop the copy so that the next run is planned on a fresh one.
		if parent != nil {
			c.cache.drop(path[len(path)-1])
		}
		p, parent, path = it.next, nil, nil
	}
	for try := 0; ; try++ {
		it.plan(p, parent, key)
		if err := hook(hookScanPlanned); err != nil {
			return err
		}
		if err := it.readRun(s); err != nil {
			return err
		}
		first := &it.leaves[0]
		if err := c.g.decodeInto(first, s.buf[c.offNode:c.offNode+c.g.size]); err != nil {
			if try == maxTorn {
				return err
			}
			if err := pause(it.ctx, try); err != nil {
				return err
			}
			continue
		}
		if first.level != 0 || !first.covers(key) {
			if p, path, err = c.stale(it.ctx, s, first, key, path); err != nil {
				return err
			}
			parent = nil
			continue
		}
		if it.take(s, key) && parent != nil {
			c.cache.drop(path[len(path)-1]) // stale: the next run is planned on a fresh copy
		}
		return nil
	}
}

// plan fills it.run: leaf p (which should cover key) and, when parent
// (the cached level-1 node p came from) is known, the leaves right of
// p in it — as many as the keys still wanted call for (a leaf holds at
// least none and at most LeafSlots: reckon half full), those that
// start below to, on p's memory node.
func (it *iterator) plan(p uint64, parent *node, key []byte) {
	c := it.c
	it.run = append(it.run[:0], p)
	if parent == nil {
		return
	}
	want := c.run
	if it.limit > 0 {
		per := max(1, c.g.LeafSlots/2)
		want = min(want, 1+(it.limit-it.n+per-1)/per)
	}
	i := 0 // p is kids[i-1] (leftmost when 0)
	for i < len(parent.keys) && bytes.Compare(parent.keys[i], key) <= 0 {
		i++
	}
	if i == 0 && parent.leftmost != p || i > 0 && parent.kids[i-1] != p {
		return
	}
	for ; i < len(parent.keys) && len(it.run) < want; i++ {
		k := parent.kids[i]
		if it.to != nil && bytes.Compare(parent.keys[i], it.to) >= 0 || ptrNode(k) != ptrNode(p) || !c.valid(k) {
			break
		}
		it.run = append(it.run, k)
	}
}

// readRun READs the run's leaves into the slot's node buffers in one
// list.
func (it *iterator) readRun(s *slot) error {
	c := it.c
	for len(it.leaves) < len(it.run) {
		it.leaves = append(it.leaves, node{})
	}
	if !c.valid(it.run[0]) {
		_, err := c.readNode(it.ctx, s, it.run[0], c.offNode) // the typed error
		return err
	}
	s.list = s.list[:0]
	for i, p := range it.run {
		s.list = append(s.list, c.readWR(s, i, p, c.offNode+i*c.stride))
	}
	return c.ops.do(it.ctx, s, ptrNode(it.run[0]), s.list)
}

// take fills buf from the run's first leaf (decoded, a leaf covering
// key) and the next ones that chain on (whole leaves whose low fence
// is their predecessor's high fence), and moves the cursor past them.
// It reports whether a whole leaf of the run did not chain on (the
// level-1 copy the run came from is stale).
func (it *iterator) take(s *slot, key []byte) (stale bool) {
	c := it.c
	it.buf, it.i = slices.Grow(it.buf[:0], len(it.run)*c.g.LeafSlots), -1
	it.arena = slices.Grow(it.arena[:0], len(it.run)*c.g.LeafSlots*(c.g.KeySize+c.g.ValueSize))
	prev := &it.leaves[0]
	it.collect(prev, key)
	for i := 1; i < len(it.run); i++ {
		if !prev.hasHigh || it.to != nil && bytes.Compare(prev.high, it.to) >= 0 {
			break
		}
		n := &it.leaves[i]
		off := c.offNode + i*c.stride
		if c.g.decodeInto(n, s.buf[off:off+c.g.size]) != nil {
			break // torn: the next run starts at prev's sibling
		}
		if n.level != 0 || !n.hasLow || !bytes.Equal(n.low, prev.high) {
			stale = true // not the leaf right of prev: the same
			break
		}
		it.collect(n, n.low)
		prev = n
	}
	slices.SortFunc(it.buf, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	if !prev.hasHigh || it.to != nil && bytes.Compare(prev.high, it.to) >= 0 {
		it.done = true
	} else {
		it.cursor, it.next = bytes.Clone(prev.high), prev.sibling
	}
	return stale
}

// collect appends leaf n's entries in [from, to) to buf, their bytes
// copied to the arena (grown beforehand by take: it does not move, so
// buf's slices of it stay good).
func (it *iterator) collect(n *node, from []byte) {
	for _, e := range n.ents {
		if bytes.Compare(e.key, from) >= 0 && (it.to == nil || bytes.Compare(e.key, it.to) < 0) {
			k := len(it.arena)
			it.arena = append(it.arena, e.key...)
			v := len(it.arena)
			it.arena = append(it.arena, e.val...)
			it.buf = append(it.buf, entry{key: it.arena[k:v:v], val: it.arena[v:len(it.arena):len(it.arena)]})
		}
	}
}

// Key implements btree.Iterator (nil when Next did not return true).
func (it *iterator) Key() []byte {
	if it.i < 0 || it.i >= len(it.buf) {
		return nil
	}
	return it.buf[it.i].key
}

// Value implements btree.Iterator (nil when Next did not return true).
func (it *iterator) Value() []byte {
	if it.i < 0 || it.i >= len(it.buf) {
		return nil
	}
	return it.buf[it.i].val
}

// Err implements btree.Iterator.
func (it *iterator) Err() error { return it.err }

// Close implements btree.Iterator.
func (it *iterator) Close() error {
	it.done, it.buf = true, nil
	return nil
}
