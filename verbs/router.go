package verbs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A completion router lets several users share one CQ (and its QPs):
// the rpc client and a store's one-sided requests, a smart worker and
// whoever posts on its QPs. Each user registers a handler and gets a Tag;
// it puts the tag in the top TagBits bits of the wr_id of every request
// it posts (Tag.ID) and keeps the other LowBits bits for itself. Whoever
// polls the CQ hands the completions to Router.Dispatch, which calls the
// handler of each completion's tag. Every completion carries its wr_id —
// errors and WR_FLUSH_ERR flushes, PRISM's StatusSkipped, receives — so
// every completion reaches the handler of the request it belongs to.

// Layout of a routed wr_id.
const (
	// TagBits is the number of high wr_id bits that carry the tag.
	TagBits = 8
	// LowBits is the number of low wr_id bits left to the registrant.
	LowBits = 64 - TagBits
	// LowMask selects the registrant's bits of a wr_id.
	LowMask = 1<<LowBits - 1
	// MaxTags is the number of tags a router hands out (tag 0 is never
	// handed out: a wr_id that nobody tagged is not routed).
	MaxTags = 1<<TagBits - 1
)

// Tag identifies a Router's handler in the high bits of a wr_id.
type Tag uint8

// ID returns the wr_id carrying the tag and low, whose bits above LowBits
// are dropped.
func (t Tag) ID(low uint64) uint64 { return uint64(t)<<LowBits | low&LowMask }

// TagOf is the tag a wr_id carries.
func TagOf(id uint64) Tag { return Tag(id >> LowBits) }

// CompletionHandler takes a completion routed to its tag, on the
// dispatching goroutine; wc is valid only during the call. An error stops
// the dispatch (Router.Dispatch returns it): the poller decides what it
// means, e.g. rpc's client fails its connection.
type CompletionHandler func(wc *WC) error

// ErrRouterFull: every tag of a Router is registered.
var ErrRouterFull = errors.New("verbs: completion router full")

// Router routes completions to handlers by the tag in their wr_id.
// Register and Unregister are safe for concurrent use, also with
// Dispatch; Dispatch allocates nothing and may run on several goroutines
// at once (several pollers of the CQs whose users share the router). The
// zero value is ready to use.
type Router struct {
	routes  [MaxTags + 1]atomic.Pointer[route]
	mu      sync.Mutex // registrations
	next    int        // where the search for a free tag starts
	dropped atomic.Uint64
}

// route is a registered handler (a pointer, so that Dispatch loads it in
// one atomic read).
type route struct{ h CompletionHandler }

// Register adds h and returns its tag. Tags are handed out round robin,
// so that a tag just unregistered is the last to be reused: a late
// completion of its old owner is then far more likely to be dropped
// than misrouted. It fails with ErrRouterFull when all MaxTags tags are
// in use, and with ErrInvalidArg for a nil h.
func (r *Router) Register(h CompletionHandler) (Tag, error) {
	if h == nil {
		return 0, fmt.Errorf("%w: a nil completion handler", ErrInvalidArg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := 0; k < MaxTags; k++ {
		t := 1 + (r.next+k)%MaxTags
		if r.routes[t].Load() == nil {
			r.routes[t].Store(&route{h: h})
			r.next = t % MaxTags
			return Tag(t), nil
		}
	}
	return 0, fmt.Errorf("%w: %d handlers", ErrRouterFull, MaxTags)
}

// Unregister removes the handler of t; completions that carry t from
// then on are dropped and counted. A Dispatch already running may still
// call it once.
func (r *Router) Unregister(t Tag) {
	r.mu.Lock()
	r.routes[t].Store(nil)
	r.mu.Unlock()
}

// Dispatch hands each completion of wcs, in order, to the handler of its
// tag. A completion whose tag has no handler (tag 0: a wr_id nobody
// tagged; a handler since unregistered) is dropped and counted in
// Dropped — never a panic. When a handler returns an error, Dispatch stops
// and returns the number of completions handed over, that one included,
// and the error; otherwise it returns len(wcs) and nil.
func (r *Router) Dispatch(wcs []WC) (int, error) {
	for i := range wcs {
		rt := r.routes[wcs[i].ID>>LowBits].Load()
		if rt == nil {
			r.dropped.Add(1)
			continue
		}
		if err := rt.h(&wcs[i]); err != nil {
			return i + 1, err
		}
	}
	return len(wcs), nil
}

// Dropped counts the completions Dispatch found no handler for.
func (r *Router) Dropped() uint64 { return r.dropped.Load() }
