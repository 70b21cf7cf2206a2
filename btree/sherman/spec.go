package sherman

import (
	"bytes"
	"context"
	"hash/maphash"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// Speculative lookup (Smart-BT): the client remembers where it last
// found a key — its leaf, the entry's slot, the leaf's node version —
// and a Get READs that one entry (leafEnt bytes, not the node) and
// checks it. The entry is taken only when it is whole (its two versions
// agree and its checksum holds: no writer was mid-way), holds the key,
// and its node tag is the cached node version. Why a whole entry that
// holds the key is the key's current value: a leaf holds a key at most
// once (a writer inserts under the leaf's lock only a key it did not
// find), and a key leaves a leaf only by a delete (the slot is emptied)
// or a split, which rewrites the whole node — every slot, under a new
// node version — and never sends the key back (the left half keeps the
// keys below the separator). The tag check adds that the leaf was not
// rewritten since the position was learnt: in a tree without merges it
// is implied by the key check (a negative control that drops it still
// passes the tests; one that drops the key check fails them), and it
// keeps a stale position from resting on that argument alone. Its
// entry version may be newer than the cached one (an update in place):
// the value is then the newer one, and that is what a leaf read would
// return too. Anything else — an empty slot (deleted), another key (the
// slot reused), a torn entry, another tag (split) — falls back to the
// leaf read, which refreshes the position (or drops it when the key is
// gone).

// specShards spreads the cache's keys over locks.
const specShards = 64

// specPos is a key's last known position.
type specPos struct {
	leaf uint64
	slot int
	ver  uint64 // the leaf's node version when found there
}

// specCache maps keys to positions; bounded, a full shard starts over.
type specCache struct {
	seed   maphash.Seed
	max    int // per shard
	shards [specShards]struct {
		mu sync.RWMutex
		m  map[string]specPos
	}
}

func newSpecCache(entries int) *specCache {
	c := &specCache{seed: maphash.MakeSeed(), max: max(1, entries/specShards)}
	for i := range c.shards {
		c.shards[i].m = map[string]specPos{}
	}
	return c
}

func (c *specCache) shard(key []byte) int { return int(maphash.Bytes(c.seed, key) % specShards) }

func (c *specCache) get(key []byte) (specPos, bool) {
	sh := &c.shards[c.shard(key)]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	p, ok := sh.m[string(key)]
	return p, ok
}

func (c *specCache) put(key []byte, p specPos) {
	sh := &c.shards[c.shard(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[string(key)]; !ok && len(sh.m) >= c.max {
		clear(sh.m)
	}
	sh.m[string(key)] = p
}

func (c *specCache) drop(key []byte) {
	sh := &c.shards[c.shard(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.m, string(key))
}

// each calls f on every cached position (tests poison it).
func (c *specCache) each(f func(key string, p specPos) specPos) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, p := range sh.m {
			sh.m[k] = f(k, p)
		}
		sh.mu.Unlock()
	}
}

// specGet tries key's cached position: one READ of one entry. ok: the
// entry holds the key as the cache said, and its value is appended to
// dst; else the caller reads the leaf.
func (c *Client) specGet(ctx context.Context, s *slot, key, dst []byte) (_ []byte, ok bool, err error) {
	pos, found := c.spec.get(key)
	if !found || !c.valid(pos.leaf) || pos.slot < 0 || pos.slot >= c.g.LeafSlots {
		return dst, false, nil
	}
	s.sgl[0] = s.sge(offEntry, c.g.leafEnt)
	w := verbs.SendWR{Opcode: verbs.OpRead, SGL: s.sgl[:1:1],
		RemoteAddr: c.nodeAddr(pos.leaf) + uint64(c.g.head+pos.slot*c.g.leafEnt), RKey: c.rkey(ptrNode(pos.leaf))}
	s.list = append(s.list[:0], w)
	if err := c.ops.do(ctx, s, ptrNode(pos.leaf), s.list); err != nil {
		return dst, false, err
	}
	e, err := c.g.decodeEntry(s.buf[offEntry:offEntry+c.g.leafEnt], uint32(pos.ver))
	if err != nil || !bytes.Equal(e.key, key) {
		c.specMisses.Add(1)
		return dst, false, nil
	}
	c.specHits.Add(1)
	return append(dst, e.val...), true, nil
}

// specLearn records where a leaf read found key (e nil: not there).
func (c *Client) specLearn(key []byte, p uint64, n *node, e *entry) {
	if e == nil {
		c.spec.drop(key)
		return
	}
	c.spec.put(key, specPos{leaf: p, slot: e.slot, ver: n.ver})
}
