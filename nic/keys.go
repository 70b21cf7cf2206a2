package nic

import (
	"sync"
	"sync/atomic"
)

// keyTable maps lkeys and rkeys to regions. Lookups are lock-free reads of
// copy-on-write tables; registration, which is rare, copies them.
//
// An lkey is index<<8 | a random byte: the index makes the lookup an array
// access, the byte catches stale keys. An rkey is a random 32-bit value,
// unguessable by peers, looked up in a map.
type keyTable struct {
	mu    sync.Mutex
	lkeys atomic.Pointer[[]*MR]
	rkeys atomic.Pointer[map[uint32]*MR]
	free  []uint32 // free lkey indexes
}

func newKeyTable() *keyTable {
	t := &keyTable{}
	l := make([]*MR, 1) // index 0 unused: lkey 0 is never valid
	t.lkeys.Store(&l)
	r := map[uint32]*MR{}
	t.rkeys.Store(&r)
	return t
}

func (t *keyTable) add(m *MR) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.lkeys.Load()
	var idx uint32
	l := make([]*MR, len(old), len(old)+1)
	copy(l, old)
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		idx = uint32(len(l))
		l = append(l, nil)
	}
	m.lkey = idx<<8 | (random32() & 0xff)
	l[idx] = m
	oldR := *t.rkeys.Load()
	for {
		m.rkey = random32()
		if _, dup := oldR[m.rkey]; !dup && m.rkey != 0 {
			break
		}
	}
	r := make(map[uint32]*MR, len(oldR)+1)
	for k, v := range oldR {
		r[k] = v
	}
	r[m.rkey] = m
	t.lkeys.Store(&l)
	t.rkeys.Store(&r)
}

func (t *keyTable) remove(m *MR) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.lkeys.Load()
	l := make([]*MR, len(old))
	copy(l, old)
	idx := m.lkey >> 8
	if int(idx) < len(l) && l[idx] == m {
		l[idx] = nil
		t.free = append(t.free, idx)
	}
	oldR := *t.rkeys.Load()
	r := make(map[uint32]*MR, len(oldR))
	for k, v := range oldR {
		if v != m {
			r[k] = v
		}
	}
	t.lkeys.Store(&l)
	t.rkeys.Store(&r)
}

// local returns the region of an lkey, or nil.
func (t *keyTable) local(lkey uint32) *MR {
	l := *t.lkeys.Load()
	idx := lkey >> 8
	if int(idx) >= len(l) {
		return nil
	}
	if m := l[idx]; m != nil && m.lkey == lkey {
		return m
	}
	return nil
}

// remote returns the region of an rkey, or nil.
func (t *keyTable) remote(rkey uint32) *MR {
	return (*t.rkeys.Load())[rkey]
}

// containing returns a region of pd that holds the n bytes at addr, or
// nil. INLINE payloads name their memory by address alone; the search is
// linear, so it is only the fallback when an inline entry's lkey does not
// resolve.
func (t *keyTable) containing(pd *PD, addr, n uint64) *MR {
	for _, m := range *t.lkeys.Load() {
		if m == nil || m.pd != pd || !m.acquire() {
			continue
		}
		_, ok := m.slice(addr, n)
		m.release()
		if ok {
			return m
		}
	}
	return nil
}
