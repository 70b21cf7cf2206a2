package nic

import (
	"sync"
	"sync/atomic"
)

// DialedLink is what a LinkTable keeps: a transport's link to one peer,
// which can tell whether it has failed.
type DialedLink interface {
	comparable
	Link
	// Dead reports whether the link has failed; the table then dials the
	// peer again on the next Get.
	Dead() bool
}

// LinkTable is the requester side every transport of another process
// shares: the links a device dialed, one per peer address. Get dials a
// peer on first use, and callers that ask for the same peer meanwhile
// wait for that one dial instead of racing their own (two connections to
// one peer would split its QPs' traffic); a dead link is replaced by the
// next Get. Snapshot hands a progress loop the links without a lock. The
// zero LinkTable is ready; it is safe for concurrent use.
type LinkTable[L DialedLink] struct {
	mu      sync.Mutex
	links   map[string]L
	pending map[string]*dialing
	snap    atomic.Pointer[[]L]
}

// dialing is a dial in progress; done closes when err is set.
type dialing struct {
	done chan struct{}
	err  error
}

// Get returns the live link to address, dialing it with dial when there
// is none. Only one dial per address runs at a time: a concurrent Get
// waits for it and shares its result, error included.
func (t *LinkTable[L]) Get(address string, dial func() (L, error)) (L, error) {
	t.mu.Lock()
	for {
		if l, ok := t.links[address]; ok && !l.Dead() {
			t.mu.Unlock()
			return l, nil
		}
		p := t.pending[address]
		if p == nil {
			break
		}
		t.mu.Unlock()
		<-p.done
		if p.err != nil {
			var zero L
			return zero, p.err
		}
		t.mu.Lock()
	}
	p := &dialing{done: make(chan struct{})}
	if t.pending == nil {
		t.pending = map[string]*dialing{}
	}
	t.pending[address] = p
	t.mu.Unlock()

	l, err := dial()

	t.mu.Lock()
	delete(t.pending, address)
	if err == nil {
		if t.links == nil {
			t.links = map[string]L{}
		}
		t.links[address] = l
		t.snapLocked()
	}
	p.err = err
	close(p.done)
	t.mu.Unlock()
	return l, err
}

// Forget drops l, the link to address, if the table still holds it (a
// newer link to the same peer stays).
func (t *LinkTable[L]) Forget(address string, l L) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.links[address]; ok && cur == l {
		delete(t.links, address)
		t.snapLocked()
	}
}

// Lookup returns the link to address the table holds, dead or alive.
func (t *LinkTable[L]) Lookup(address string) (L, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.links[address]
	return l, ok
}

// Snapshot returns the links as of the last change, without locking: a
// progress loop calls it on every turn. The caller must not modify it.
func (t *LinkTable[L]) Snapshot() []L {
	if p := t.snap.Load(); p != nil {
		return *p
	}
	return nil
}

// snapLocked republishes the link list; t.mu is held.
func (t *LinkTable[L]) snapLocked() {
	ls := make([]L, 0, len(t.links))
	for _, l := range t.links {
		ls = append(ls, l)
	}
	t.snap.Store(&ls)
}
