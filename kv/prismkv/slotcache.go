package prismkv

import "sync/atomic"

// slotCache remembers, per key, its slot and the slot's value as last
// seen (a PUT's guess for its CAS). It is direct-mapped by the key's hash
// and lock-free, and its buckets hold their entries in place: a lookup
// reads one 32-byte bucket of a flat array (the key's 64-bit hash is its
// tag: no pointer to follow, no key to compare), so the many tasks of a
// client read it without contending on a lock or missing the CPU cache
// three times. Two keys that map to the same bucket evict each other; a
// miss only costs the slot lookup the cache would have saved.
//
// A bucket is a seqlock: a writer makes its sequence odd, writes, and
// makes it even again; a reader that saw it odd or changed misses. So an
// entry never mixes two keys' words (a PUT trusts a cached slot as far as
// its key check, which compares a key's length and first 24 bytes only).
// Writers do not wait for each other: one that finds the bucket being
// written skips (a cache may forget). A stale entry, or one of another key
// with the same 64-bit hash, is caught by the operation that uses it (a
// GET compares the item's key, a PUT's chain checks the key before its
// CAS, which compares the slot's value) and forgotten.
type slotCache struct {
	mask    uint64
	buckets []cacheBucket
}

// cacheBucket is one key's entry: head holds the sequence (high 32 bits;
// odd while a writer writes) and the slot (low 32 bits); tag is the key's
// hash with the low bit set (0: empty); ptr and n are the slot's value
// as last seen.
type cacheBucket struct {
	head atomic.Uint64
	tag  atomic.Uint64
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
	return &slotCache{mask: uint64(n - 1), buckets: make([]cacheBucket, n)}
}

// bucket is the bucket of a key whose hash is h (kv.Hash), and the tag
// its entry carries.
func (c *slotCache) bucket(h uint64) (*cacheBucket, uint64) {
	if c.buckets == nil {
		return nil, 0
	}
	return &c.buckets[(h^h>>29)&c.mask], h | 1
}

// writing reports whether a bucket head's sequence is odd.
func writing(head uint64) bool { return head&(1<<32) != 0 }

func (c *slotCache) lookup(h uint64) (cached, bool) {
	b, tag := c.bucket(h)
	if b == nil {
		return cached{}, false
	}
	head := b.head.Load()
	if writing(head) || b.tag.Load() != tag {
		return cached{}, false
	}
	v := cached{slot: int(uint32(head)), ptr: b.ptr.Load(), n: b.n.Load()}
	if b.head.Load() != head {
		return cached{}, false // rewritten meanwhile
	}
	return v, true
}

// lock makes b's sequence odd and returns its head as it was, unless
// another writer has it.
func (b *cacheBucket) lock() (uint64, bool) {
	head := b.head.Load()
	return head, !writing(head) && b.head.CompareAndSwap(head, head+1<<32)
}

// unlock publishes b's entry with slot: the sequence of head, as lock
// returned it, moves on by two.
func (b *cacheBucket) unlock(head uint64, slot uint32) {
	b.head.Store((head>>32+2)<<32 | uint64(slot))
}

func (c *slotCache) remember(h uint64, v cached) {
	b, tag := c.bucket(h)
	if b == nil {
		return
	}
	head, ok := b.lock()
	if !ok {
		return
	}
	b.tag.Store(tag)
	b.ptr.Store(v.ptr)
	b.n.Store(v.n)
	b.unlock(head, uint32(v.slot))
}

func (c *slotCache) forget(h uint64) {
	b, tag := c.bucket(h)
	if b == nil || b.tag.Load() != tag {
		return
	}
	head, ok := b.lock()
	if !ok {
		return
	}
	if b.tag.Load() == tag {
		b.tag.Store(0)
	}
	b.unlock(head, uint32(head))
}
