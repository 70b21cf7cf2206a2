package shm

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// HoldStripe connects dev to the device at peer, waits until it maps the
// region rkey, then takes the atomics lock stripe of addr on the peer and
// behaves like a 32-byte atomic caught half-way: it journals the 32 bytes
// at addr and overwrites the first 16 of them with 0xff. It returns with
// the stripe held, for a test to kill the process.
func HoldStripe(dev verbs.Device, peer string, rkey uint32, addr uint64) error {
	d, ok := dev.(*device)
	if !ok {
		return fmt.Errorf("not a shm device")
	}
	t, err := d.Resolve(peer)
	if err != nil {
		return err
	}
	l, ok := t.(*link)
	if !ok || l.Dead() {
		return fmt.Errorf("no link to %s", peer)
	}
	for deadline := time.Now().Add(5 * time.Second); l.resolve(rkey, addr, 32) == nil; {
		if time.Now().After(deadline) {
			return fmt.Errorf("region %#x never mapped", rkey)
		}
		time.Sleep(time.Millisecond)
	}
	mem := l.resolve(rkey, addr, 32)
	s := nic.StripeOf(addr)
	l.locks.Lock(s)
	var orig [4]uint64
	for i := range orig {
		orig[i] = atomic.LoadUint64(u64(mem, 8*i))
	}
	l.locks.Journal(s, rkey, addr, &orig, 4)
	atomic.StoreUint64(u64(mem, 0), ^uint64(0))
	atomic.StoreUint64(u64(mem, 8), ^uint64(0))
	return nil
}

// Connections returns how many connections dev has: sessions (peers that
// dialed it) plus live links (peers it dialed).
func Connections(dev verbs.Device) int {
	d := dev.(*device)
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sessions) + len(d.links.Snapshot())
}

// ControlFiles returns duplicates of the control sockets of every
// connection of dev, for a test to hand to another process (so that the
// sockets outlive this process).
func ControlFiles(dev verbs.Device) ([]*os.File, error) {
	d := dev.(*device)
	d.mu.Lock()
	var conns []*net.UnixConn
	for _, l := range d.links.Snapshot() {
		if l.conn != nil {
			conns = append(conns, l.conn)
		}
	}
	for s := range d.sessions {
		conns = append(conns, s.conn)
	}
	d.mu.Unlock()
	var fs []*os.File
	for _, c := range conns {
		f, err := c.File()
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// Peers returns how many peers dev's peer table numbers.
func Peers(dev verbs.Device) int { return dev.(*device).peers.Len() }

// StallDeposits makes every deposit of this process stop for good at
// stage (1: payload copied, completion not published; 2: completion
// published, receive not consumed), after printing "stalled": a test
// kills the process there.
func StallDeposits(stage int) {
	depositStall = func(s int) {
		if s == stage {
			fmt.Println("stalled")
			select {}
		}
	}
}

// HoldDeposit makes the nth deposit of this process from now on (1 for
// the next) stop at stage until release is called; held is closed when it
// got there. Other deposits run as usual. Deposits must not run
// concurrently (the test posts from one goroutine).
func HoldDeposit(stage, nth int) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var started atomic.Int64
	var this atomic.Bool
	depositStall = func(s int) {
		if s == 1 {
			this.Store(started.Add(1) == int64(nth))
		}
		if s == stage && this.Load() {
			this.Store(false)
			close(h)
			<-r
		}
	}
	return h, func() { close(r) }
}

// PollEachAnswerAtPublish makes every Append, right after it publishes a
// request, ring the device, wait (up to a second) for its answer and
// have another goroutine poll the link then, as the NIC goroutine or
// another QP's poller may (the poll completes the request once the
// poster lets go of its QP). It returns how many of those polls left the
// link dead, and the undo.
func PollEachAnswerAtPublish() (deaths func() int, undo func()) {
	var dead atomic.Int64
	hook := func(l *link) {
		l.peerSeg.ring()
		for deadline := time.Now().Add(time.Second); !l.rings.resp.Pending() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Microsecond)
		}
		polled := make(chan struct{})
		go func() {
			// The poll takes the answer and then waits for the QP's
			// lock, which the poster holds: it reports before.
			go func() { time.Sleep(5 * time.Millisecond); close(polled) }()
			l.poll()
		}()
		<-polled
		if l.dead.Load() {
			dead.Add(1)
		}
	}
	afterPublish.Store(&hook)
	return func() int { return int(dead.Load()) }, func() { afterPublish.Store(nil) }
}

// AnswerWhileLookingEmpty makes the first poll that finds nothing in
// flight call post (which posts a request) on another goroutine and wait
// (up to a second) until the request's answer is in the response ring
// before it goes on: a poller preempted right after it found the queue
// empty. It returns the undo.
func AnswerWhileLookingEmpty(post func()) (undo func()) {
	var armed atomic.Bool
	armed.Store(true)
	hook := func(l *link) {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		go post()
		for deadline := time.Now().Add(time.Second); !l.rings.resp.Pending() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Microsecond)
		}
	}
	afterEmptyLook.Store(&hook)
	return func() { afterEmptyLook.Store(nil) }
}
