package rpctree

import (
	"context"

	"github.com/rdmakit/rdmakit/btree"
)

// iter is a Scan's iterator: it fetches a page at a time.
type iter struct {
	c        *Client
	ctx      context.Context
	from, to []byte
	limit    int // keys left; ≤ 0 none asked for
	bounded  bool
	page     []byte // undecoded rest of the page
	more     bool   // the server has keys past the page
	started  bool
	k, v     []byte
	err      error
	done     bool
}

// Scan implements btree.Tree.
func (c *Client) Scan(ctx context.Context, from, to []byte, limit int) btree.Iterator {
	it := &iter{c: c, ctx: ctx, from: append([]byte(nil), from...), limit: limit, bounded: limit > 0}
	if to != nil {
		it.to = append([]byte{}, to...)
	}
	if len(from) > MaxKey || len(to) > MaxKey {
		it.err, it.done = btree.Check(make([]byte, MaxKey+1), nil, MaxKey, MaxValue), true
	}
	return it
}

// fetch asks for the next page, from it.from on.
func (it *iter) fetch() bool {
	b := make([]byte, MaxMessage)
	limit := 0
	if it.bounded {
		limit = it.limit
	}
	n, err := it.c.call(it.ctx, MethodScan, scanReq(it.from, it.to, limit), b)
	if err != nil {
		it.err = err
		return false
	}
	if n < 1 {
		it.err = errProtocol
		return false
	}
	it.more, it.page, it.started = b[0] != 0, b[1:n], true
	return true
}

// Next implements btree.Iterator.
func (it *iter) Next() bool {
	if it.done || it.err != nil {
		return false
	}
	if it.bounded && it.limit <= 0 {
		it.done = true
		return false
	}
	for len(it.page) == 0 {
		if it.started && !it.more {
			it.done = true
			return false
		}
		if !it.fetch() {
			return false
		}
	}
	k, v, rest, err := nextEntry(it.page)
	if err != nil {
		it.err = err
		return false
	}
	it.k, it.v, it.page = k, v, rest
	it.from = append(append(it.from[:0], k...), 0) // the next page starts just after k
	it.limit--
	return true
}

// Key implements btree.Iterator.
func (it *iter) Key() []byte { return it.k }

// Value implements btree.Iterator.
func (it *iter) Value() []byte { return it.v }

// Err implements btree.Iterator.
func (it *iter) Err() error { return it.err }

// Close implements btree.Iterator.
func (it *iter) Close() error {
	it.done = true
	return nil
}
