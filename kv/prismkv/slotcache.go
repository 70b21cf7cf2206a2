package prismkv

import "sync/atomic"

// slotCache remembers, per key, its slot and the slot's value as last
// seen (a PUT's guess for its CAS). It is direct-mapped by the key's hash
// and lock-free: a lookup is one atomic load and a key comparison, so
// the many tasks of a client read it without contending on a lock. Two
// keys that map to the same bucket evict each other; a miss only costs
// the slot lookup the cache would have saved, and a stale entry is
// caught by the operation that uses it (the item's key, the CAS's
// compare).
type slotCache struct {
	mask    uint64
	buckets []atomic.Pointer[cacheEntry]
}

// cacheEntry is one key's entry. Its key is fixed; the slot's value is
// updated in place (the pair may be read torn, which makes a PUT's CAS
// fail and tell the current value: still correct).
type cacheEntry struct {
	key  string
	slot atomic.Int64
	ptr  atomic.Uint64
	n    atomic.Uint64
}

// newSlotCache makes a cache of at least keys buckets (a power of two);
// keys < 0 disables it.
func newSlotCache(keys int) *slotCache {
	if keys < 0 {
		return &slotCache{}
	}
	n := 1
	for n < keys {
		n <<= 1
	}
	return &slotCache{mask: uint64(n - 1), buckets: make([]atomic.Pointer[cacheEntry], n)}
}

// bucket is the bucket of a key whose hash is h (kv.Hash).
func (c *slotCache) bucket(h uint64) *atomic.Pointer[cacheEntry] {
	if c.buckets == nil {
		return nil
	}
	return &c.buckets[(h^h>>29)&c.mask]
}

func (c *slotCache) lookup(key []byte, h uint64) (cached, bool) {
	b := c.bucket(h)
	if b == nil {
		return cached{}, false
	}
	e := b.Load()
	if e == nil || e.key != string(key) {
		return cached{}, false
	}
	return cached{slot: int(e.slot.Load()), ptr: e.ptr.Load(), n: e.n.Load()}, true
}

func (c *slotCache) remember(key []byte, h uint64, v cached) {
	b := c.bucket(h)
	if b == nil {
		return
	}
	e := b.Load()
	if e == nil || e.key != string(key) {
		e = &cacheEntry{key: string(key)}
		e.slot.Store(int64(v.slot))
		e.ptr.Store(v.ptr)
		e.n.Store(v.n)
		b.Store(e)
		return
	}
	e.slot.Store(int64(v.slot))
	e.ptr.Store(v.ptr)
	e.n.Store(v.n)
}

func (c *slotCache) forget(key []byte, h uint64) {
	b := c.bucket(h)
	if b == nil {
		return
	}
	if e := b.Load(); e != nil && e.key == string(key) {
		b.CompareAndSwap(e, nil)
	}
}
