package race

import (
	"sync"
	"sync/atomic"
)

// SlotCache is Smart-HT's speculative lookup: it maps a key to the slot
// that last held it and that slot's word. A GET of a cached key reads the
// slot and the cached block in one round trip; if the slot still holds
// the cached word, the block is the current value (one round trip instead
// of RACE's two). Otherwise it follows the slot's new word, or falls back
// to the full lookup. The slot is always read fresh, so a cached slot never
// returns a value older than a completed PUT. Safe for concurrent use;
// share one among the clients of a process.
type SlotCache struct {
	max    int
	mu     sync.RWMutex
	m      map[string]*candidate // updated in place: a PUT allocates nothing
	hits   atomic.Uint64
	misses atomic.Uint64
}

// NewSlotCache returns a cache of at most max keys (default 1<<20).
func NewSlotCache(max int) *SlotCache {
	if max <= 0 {
		max = 1 << 20
	}
	return &SlotCache{max: max, m: map[string]*candidate{}}
}

// Stats returns the speculative lookups that were served by the cached
// slot (hits) and those that fell back (misses).
func (sc *SlotCache) Stats() (hits, misses uint64) { return sc.hits.Load(), sc.misses.Load() }

func (sc *SlotCache) put(key []byte, x candidate) {
	if sc == nil {
		return
	}
	sc.mu.Lock()
	if p, ok := sc.m[string(key)]; ok {
		*p = x
		sc.mu.Unlock()
		return
	}
	if len(sc.m) >= sc.max {
		clear(sc.m)
	}
	sc.m[string(key)] = &x
	sc.mu.Unlock()
}

func (sc *SlotCache) lookup(key []byte) (candidate, bool) {
	if sc == nil {
		return candidate{}, false
	}
	sc.mu.RLock()
	p, ok := sc.m[string(key)]
	var x candidate
	if ok {
		x = *p
	}
	sc.mu.RUnlock()
	return x, ok
}

func (sc *SlotCache) drop(key []byte) {
	if sc == nil {
		return
	}
	sc.mu.Lock()
	delete(sc.m, string(key))
	sc.mu.Unlock()
}
