package tcp

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// DefaultMemBudget is the default node-wide memory budget of a tcp device
// (membudget=): the bytes its served connections may hold in frames too
// large for their fixed buffers — requests still arriving and READ replies
// not yet written. Sixteen maximal frames fit.
const DefaultMemBudget = 256 << 20

// DefaultMaxConns is the default limit on connections a tcp device serves
// at once (maxconns=).
const DefaultMaxConns = 4096

// connBuffers is what one served connection holds whatever its peer does:
// its receive and reply buffers. maxconns × connBuffers is the part of a
// node's memory outside the budget.
const connBuffers = 64<<10 + maxOut + 4<<10

// budget is a node-wide pool of bytes that served connections reserve
// before they hold a large frame. A connection that cannot get its share
// waits, reading nothing more from its peer (back-pressure); a reservation
// is whole, taken before the first byte is stored, so connections that each
// hold part of what they need never wait for one another.
//
// Buffers that connections keep for their next large frame (holds) stay
// reserved while nobody else needs the bytes; a connection that does takes
// them back from idle holds before it waits.
type budget struct {
	mu      sync.Mutex
	cond    sync.Cond
	total   int64
	free    int64
	closed  bool
	holds   map[*hold]struct{}
	waiting int // connections waiting in acquire
}

func newBudget(total int64) *budget {
	b := &budget{total: total, free: total, holds: map[*hold]struct{}{}}
	b.cond.L = &b.mu
	return b
}

// acquire reserves n bytes, taking back idle buffers and then waiting
// while the budget is spent. It fails when n exceeds the whole budget or
// the device closes.
func (b *budget) acquire(n int64) error {
	if n > b.total {
		return fmt.Errorf("%w: %d bytes exceed the node's memory budget of %d", ErrFrameTooLarge, n, b.total)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n && !b.closed {
		for h := range b.holds {
			b.free += h.reclaim()
			if b.free >= n {
				break
			}
		}
		if b.free < n {
			b.waiting++
			b.cond.Wait() // a release, or a buffer gone idle
			b.waiting--
		}
	}
	if b.closed {
		return verbs.ErrClosed
	}
	b.free -= n
	return nil
}

// release returns n bytes to the budget.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// inUse reports the bytes reserved now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.free
}

// close wakes every waiter with verbs.ErrClosed.
func (b *budget) close() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// hold is a large buffer one connection keeps between uses, with its
// reservation. In use, it is the connection's alone; idle, the budget may
// take it back. A nil budget reserves nothing (the links' readers).
type hold struct {
	b        *budget
	mu       sync.Mutex // after budget.mu
	idle     []byte     // the buffer, while unused
	reserved int64      // for the buffer, idle or in use
}

func newHold(b *budget) *hold {
	h := &hold{b: b}
	if b != nil {
		b.mu.Lock()
		b.holds[h] = struct{}{}
		b.mu.Unlock()
	}
	return h
}

// get returns the idle buffer if its capacity is at least n. Otherwise it
// lets the buffer go, reserves n bytes (waiting for them) and returns nil:
// the caller allocates at most n bytes.
func (h *hold) get(n int) ([]byte, error) {
	h.mu.Lock()
	if cap(h.idle) >= n {
		buf := h.idle
		h.idle = nil
		h.mu.Unlock()
		return buf, nil
	}
	old := h.reserved
	h.idle, h.reserved = nil, 0
	h.mu.Unlock()
	if h.b == nil {
		return nil, nil
	}
	h.b.release(old) // never wait holding part of the budget
	if err := h.b.acquire(int64(n)); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.reserved = int64(n)
	h.mu.Unlock()
	return nil, nil
}

// put makes buf, got or allocated after get, the idle buffer.
func (h *hold) put(buf []byte) {
	h.mu.Lock()
	h.idle = buf[:0]
	h.mu.Unlock()
	if h.b != nil {
		h.b.mu.Lock()
		if h.b.waiting > 0 { // they may take it back
			h.b.cond.Broadcast()
		}
		h.b.mu.Unlock()
	}
}

// reclaim takes back an idle buffer's reservation; budget.mu is held.
func (h *hold) reclaim() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle == nil {
		return 0
	}
	n := h.reserved
	h.idle, h.reserved = nil, 0
	return n
}

// close returns the reservation; the connection ends.
func (h *hold) close() {
	if h.b == nil {
		return
	}
	h.b.mu.Lock()
	delete(h.b.holds, h)
	h.b.mu.Unlock()
	h.mu.Lock()
	n := h.reserved
	h.idle, h.reserved = nil, 0
	h.mu.Unlock()
	h.b.release(n)
}

// parseBytes parses a byte count: a number with an optional KiB, MiB or
// GiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad byte count %q", s)
	}
	return n * mult, nil
}
