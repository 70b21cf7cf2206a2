package sock

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// waitq lets goroutines wait for an event that another goroutine
// broadcasts. wait returns a channel closed by the next broadcast;
// broadcast costs one atomic-free check when nobody waits.
type waitq struct {
	mu sync.Mutex
	ch chan struct{}
}

func (q *waitq) wait() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ch == nil {
		q.ch = make(chan struct{})
	}
	return q.ch
}

func (q *waitq) broadcast() {
	q.mu.Lock()
	if q.ch != nil {
		close(q.ch)
		q.ch = nil
	}
	q.mu.Unlock()
}

// deadline is one direction's deadline of a connection (as net.Pipe keeps
// them): expired is closed when the deadline passes.
type deadline struct {
	mu      sync.Mutex
	t       *time.Timer
	expired chan struct{}
	gone    atomic.Bool // expired is closed: the fast check
}

func newDeadline() *deadline { return &deadline{expired: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.t != nil && !d.t.Stop() {
		<-d.expired // the timer fired: wait until it closed the channel
	}
	d.t = nil
	closed := isClosed(d.expired)
	if t.IsZero() {
		if closed {
			d.expired = make(chan struct{})
		}
		d.gone.Store(false)
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.expired = make(chan struct{})
		}
		ch := d.expired
		d.gone.Store(false)
		d.t = time.AfterFunc(dur, func() {
			d.gone.Store(true)
			close(ch)
		})
		return
	}
	if !closed {
		close(d.expired)
	}
	d.gone.Store(true)
}

func (d *deadline) wait() <-chan struct{} {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expired
}

func (d *deadline) passed() bool { return d != nil && d.gone.Load() }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// errTimeout is what a Read or Write past its deadline returns (inside a
// *net.OpError): os.ErrDeadlineExceeded, a net.Error whose Timeout is true.
var errTimeout error = os.ErrDeadlineExceeded

// errStopped is returned by park when its stop channel closed.
var errStopped = net.ErrClosed

// park waits for ch, the deadline, stop or the link's end. The i-th park
// of one wait also wakes after a safety interval of base·2^i (at most
// most), so that a doorbell lost to a race costs latency, never a hang.
// Over shm the sleeping word and the records are ordered by the same
// memory once the device stores WRITEs directly (it sends them through its
// rings until the peer's region is mapped); over tcp the peer's record can
// still be on the wire when the parker's last look finds nothing, so the
// tcp base is short (see link.parkBase).
func park(ch <-chan struct{}, d *deadline, stop, done <-chan struct{}, base, most time.Duration, i int) error {
	t := getTimer(min(base<<min(i, 20), most))
	defer putTimer(t)
	select {
	case <-ch:
	case <-t.C:
	case <-d.wait():
		return errTimeout
	case <-stop:
		return errStopped
	case <-done:
	}
	return nil
}

// Parked goroutines take their backstop timers from a pool: in SP2C and
// SPSC a reader parks on every round trip, and a new timer each time was
// the hot path's only allocation.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

func getTimer(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

// putTimer stops t and pools it. Since Go 1.23 a stopped timer's channel
// holds no stale value, so the next Reset starts clean.
func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}
