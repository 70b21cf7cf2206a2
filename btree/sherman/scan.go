package sherman

import (
	"bytes"
	"context"
	"slices"

	"github.com/rdmakit/rdmakit/btree"
)

// Scan implements btree.Tree. The iterator reads one leaf at a time:
// each leaf is read whole and consistent (node and entry versions
// agree), its keys in [cursor, min(to, high fence)) are returned
// sorted, and the cursor moves to the leaf's high fence, where the
// leaf's sibling starts (nodes split but never merge, so a sibling's low
// fence is its left neighbour's old high one). A key present for the
// whole scan is in the leaf that covered it when read: returned once,
// in order.
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
	i      int
	done   bool
	err    error
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

// fill reads the leaf at the cursor into buf.
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
	p, path := it.next, []uint64(nil)
	var err error
	if p == 0 {
		if p, path, err = c.leafFor(it.ctx, s, key, false); err != nil {
			return err
		}
	}
	for {
		n, err := c.readNode(it.ctx, s, p, c.offNode)
		if err != nil {
			return err
		}
		if n.level != 0 || !n.covers(key) {
			if p, path, err = c.stale(it.ctx, s, n, key, path); err != nil {
				return err
			}
			continue
		}
		it.buf, it.i = it.buf[:0], -1
		for _, e := range n.ents {
			if bytes.Compare(e.key, key) >= 0 && (it.to == nil || bytes.Compare(e.key, it.to) < 0) {
				it.buf = append(it.buf, entry{key: bytes.Clone(e.key), val: bytes.Clone(e.val)})
			}
		}
		slices.SortFunc(it.buf, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
		if !n.hasHigh || it.to != nil && bytes.Compare(n.high, it.to) >= 0 {
			it.done = true
		} else {
			it.cursor, it.next = bytes.Clone(n.high), n.sibling
		}
		return nil
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
