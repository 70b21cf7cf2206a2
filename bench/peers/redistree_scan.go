package peers

import (
	"context"
	"strconv"

	"github.com/rdmakit/rdmakit/btree"
)

// redisIter is a RedisTree Scan: ZRANGEBYLEX a page at a time, each page
// from just after the last member of the one before.
type redisIter struct {
	t        *RedisTree
	ctx      context.Context
	lo, hi   []byte // the next page's bounds
	left     int    // keys still wanted; < 0 unbounded
	page     [][]byte
	last     bool // the page was the range's last
	k, v     []byte
	err      error
	finished bool
}

// Scan implements btree.Tree.
func (t *RedisTree) Scan(ctx context.Context, from, to []byte, limit int) btree.Iterator {
	it := &redisIter{t: t, ctx: ctx, lo: []byte("-"), hi: []byte("+"), left: -1}
	if limit > 0 {
		it.left = limit
	}
	if from != nil {
		it.lo = escape([]byte{'['}, from)
	}
	if to != nil {
		it.hi = escape([]byte{'('}, to)
	}
	for _, b := range [][]byte{from, to} {
		if len(b) > btree.MaxKey {
			it.err = btree.Check(b, nil, btree.MaxKey, btree.MaxValue)
		}
	}
	return it
}

// fetch reads the next page.
func (it *redisIter) fetch() bool {
	n := redisScanPage
	if it.left >= 0 {
		n = min(n, it.left)
	}
	c, err := it.t.take(it.ctx)
	if err != nil {
		it.err = err
		return false
	}
	defer it.t.give(c)
	c.cmd([]byte("ZRANGEBYLEX"), it.t.set, it.lo, it.hi, []byte("LIMIT"), []byte("0"), []byte(strconv.Itoa(n)))
	if err := it.t.flush(c); err != nil {
		it.err = err
		return false
	}
	it.page, it.err = c.array(it.page[:0])
	if it.err != nil {
		return false
	}
	it.last = len(it.page) < n
	if len(it.page) > 0 {
		it.lo = append([]byte{'('}, it.page[len(it.page)-1]...)
	}
	return true
}

// Next implements btree.Iterator.
func (it *redisIter) Next() bool {
	if it.finished || it.err != nil || it.left == 0 {
		return false
	}
	if len(it.page) == 0 {
		if it.last || !it.fetch() || len(it.page) == 0 {
			it.finished = it.err == nil
			return false
		}
	}
	m := it.page[0]
	it.page = it.page[1:]
	if it.k, it.v, it.err = member(m); it.err != nil {
		return false
	}
	if it.left > 0 {
		it.left--
	}
	return true
}

// Key implements btree.Iterator.
func (it *redisIter) Key() []byte { return it.k }

// Value implements btree.Iterator.
func (it *redisIter) Value() []byte { return it.v }

// Err implements btree.Iterator.
func (it *redisIter) Err() error { return it.err }

// Close implements btree.Iterator.
func (it *redisIter) Close() error {
	it.finished = true
	return nil
}
