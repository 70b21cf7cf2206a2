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
type budget struct {
	mu     sync.Mutex
	cond   sync.Cond
	total  int64
	free   int64
	closed bool
}

func newBudget(total int64) *budget {
	b := &budget{total: total, free: total}
	b.cond.L = &b.mu
	return b
}

// acquire reserves n bytes, waiting while the budget is spent. It fails
// when n exceeds the whole budget or the device closes.
func (b *budget) acquire(n int64) error {
	if n > b.total {
		return fmt.Errorf("%w: %d bytes exceed the node's memory budget of %d", ErrFrameTooLarge, n, b.total)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n && !b.closed {
		b.cond.Wait()
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
