package sherman

import "sync"

// maxCached bounds the internal nodes a client caches; past it the
// cache starts over.
const maxCached = 1 << 16

// cache holds copies of internal nodes. A copy can be stale (the node
// split since): the reader notices at the level below (the key is past
// the node's high fence) and follows sibling pointers, then drops the
// copies on its path.
type cache struct {
	mu sync.RWMutex
	m  map[uint64]*node
}

func (c *cache) get(p uint64) *node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[p]
}

// put caches n (which must not alias a slot's buffer).
func (c *cache) put(p uint64, n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[p] = n
}

func (c *cache) drop(ps ...uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		delete(c.m, p)
	}
}
