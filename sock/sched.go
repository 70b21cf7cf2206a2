package sock

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// In SP2C and SPSC a Write only queues its bytes (txQueue); the partition's
// TX goroutine forwards the queues of the connections that have data,
// round-robin, at most the batch limit of MTU-sized records from each per
// round (the thesis' intra-partition fairness), and an RX goroutine (or the
// same one, in SPSC) polls the ring and dispatches.

// scheduler is a partition's list of connections with data to send.
type scheduler struct {
	mu     sync.Mutex
	active []*Conn
	wake   chan struct{}
}

func (s *scheduler) init() { s.wake = make(chan struct{}, 1) }

func (s *scheduler) add(c *Conn) {
	s.mu.Lock()
	s.active = append(s.active, c)
	s.mu.Unlock()
	signal(s.wake)
}

func (s *scheduler) next() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.active) == 0 {
		return nil
	}
	c := s.active[0]
	copy(s.active, s.active[1:])
	s.active[len(s.active)-1] = nil
	s.active = s.active[:len(s.active)-1]
	return c
}

// txQueue is a connection's send queue in SP2C and SPSC: a lock-free
// single-producer single-consumer byte ring (the thesis' per-connection TX
// queue). Write (under the connection's wmu) is the producer and pushes in
// bulk — one atomic store publishes a whole Write's bytes; the partition's
// TX goroutine (holding the partition) is the consumer and pops in bulk —
// as many records as its turn allows, one atomic store.
type txQueue struct {
	c          *Conn
	buf        []byte
	head, tail atomic.Uint64 // consumer and producer positions
	limit      atomic.Int64  // bytes the queue may hold (SetWriteBuffer)
	capacity   atomic.Int64  // len(buf), readable without wmu
	queued     atomic.Bool   // on the scheduler's list
	fin        atomic.Bool   // send FIN once the queue is empty
	space      waitq
}

func (t *txQueue) init(c *Conn) {
	t.c = c
	t.limit.Store(int64(c.sndbuf))
	if c.l.ep.cfg.Mode != Direct {
		t.buf = make([]byte, ringCap(c.sndbuf))
		t.capacity.Store(int64(len(t.buf)))
	}
}

// ringCap is the power of two at least n (and 4 KiB).
func ringCap(n int) int {
	c := 4096
	for c < n {
		c *= 2
	}
	return c
}

func (t *txQueue) used() int { return int(t.tail.Load() - t.head.Load()) }

// push copies as much of b as fits and publishes it; it returns the bytes
// taken. Only the producer calls it.
func (t *txQueue) push(b []byte) int {
	tail := t.tail.Load()
	n := min(len(b), int(t.limit.Load())-t.used(), len(t.buf)-t.used())
	if n <= 0 {
		return 0
	}
	size := uint64(len(t.buf))
	i := int(tail % size)
	k := copy(t.buf[i:], b[:n])
	copy(t.buf, b[k:n])
	t.tail.Store(tail + uint64(n))
	return n
}

// peek returns the queued bytes as two slices; only the consumer calls it.
func (t *txQueue) peek() ([]byte, []byte) {
	head, tail := t.head.Load(), t.tail.Load()
	n := int(tail - head)
	if n == 0 {
		return nil, nil
	}
	size := len(t.buf)
	i := int(head % uint64(size))
	if i+n <= size {
		return t.buf[i : i+n], nil
	}
	return t.buf[i:], t.buf[:i+n-size]
}

// needsGrow reports whether a queue of n bytes needs a larger ring.
func (t *txQueue) needsGrow(n int) bool {
	return t.c.l.ep.cfg.Mode != Direct && int64(n) > t.capacity.Load()
}

// setLimit changes the queue's size. A size beyond the ring's capacity
// swaps in a larger ring with both ends excluded: the caller then holds wmu
// (the producer); the partition is taken here (the consumer pops under it).
func (t *txQueue) setLimit(n int) error {
	if t.needsGrow(n) {
		if !t.c.part.lock(t.c.closed, nil) {
			return net.ErrClosed
		}
		nb := make([]byte, ringCap(n))
		a, b := t.peek()
		k := copy(nb, a)
		copy(nb[k:], b)
		used := t.used()
		t.buf = nb
		t.capacity.Store(int64(len(nb)))
		t.head.Store(0)
		t.tail.Store(uint64(used))
		t.c.part.unlock()
	}
	t.limit.Store(int64(n))
	t.space.broadcast()
	return nil
}

// schedule puts the connection on its partition's list if it has
// something to send and is not on it.
func (t *txQueue) schedule() {
	if (t.used() > 0 || t.fin.Load()) && t.queued.CompareAndSwap(false, true) {
		t.c.part.sched.add(t.c)
	}
}

// kick reschedules a connection that waited for credit.
func (t *txQueue) kick() {
	if t.c == nil || t.c.l.ep.cfg.Mode == Direct {
		return
	}
	t.schedule()
}

// enqueue queues b, waiting for room in the queue.
func (t *txQueue) enqueue(b []byte) (int, error) {
	c := t.c
	total := 0
	parks := 0
	for len(b) > 0 {
		if err := c.writeErr(); err != nil {
			return total, err
		}
		n := t.push(b)
		if n > 0 {
			t.schedule()
			total += n
			b = b[n:]
			continue
		}
		ch := t.space.wait()
		if n = t.push(b); n > 0 {
			t.schedule()
			total += n
			b = b[n:]
			continue
		}
		if err := park(ch, c.wd, c.closed, c.l.done, c.l.parkBase, c.l.parkMax, parks); err != nil {
			return total, err
		}
		parks++
	}
	return total, nil
}

// finish sends FIN after the queued bytes: at once in Direct mode, by the
// TX goroutine otherwise.
func (t *txQueue) finish() error {
	c := t.c
	if c.l.ep.cfg.Mode == Direct {
		return c.part.sendControl(kindFin, c.peer)
	}
	t.fin.Store(true)
	t.schedule()
	return nil
}

// stop wakes a Write waiting for room (Close, or the link's end).
func (t *txQueue) stop() { t.space.broadcast() }

// txTurn gives connection c its turn on partition p: at most the batch
// limit of records from its queue. It reports whether it sent anything.
func (p *partition) txTurn(c *Conn) bool {
	t := &c.txq
	if !p.lock(nil, nil) {
		return false
	}
	a, b := t.peek()
	sent := 0
	var err error
	if len(a)+len(b) > 0 {
		sent, err = c.sendBatch(a, b)
		t.head.Add(uint64(sent))
	}
	p.unlock()
	t.queued.Store(false)
	finNow := err == nil && t.used() == 0 && t.fin.CompareAndSwap(true, false)
	if err == nil && c.avail() > 0 {
		t.schedule() // more to send and credit: back of the line
	}
	if sent > 0 {
		t.space.broadcast()
	}
	if finNow {
		p.sendControl(kindFin, c.peer)
	}
	return sent > 0 || finNow
}

// txRound gives every connection waiting at the round's start one turn.
func (p *partition) txRound() bool {
	did := false
	p.sched.mu.Lock()
	n := len(p.sched.active)
	p.sched.mu.Unlock()
	for ; n > 0; n-- {
		c := p.sched.next()
		if c == nil {
			break
		}
		if p.txTurn(c) {
			did = true
		}
	}
	if did {
		p.l.ctrl.ringIfAsleep()
	}
	return did
}

// rxRound polls the ring once, and the control ring for credit.
func (p *partition) rxRound() bool {
	n := p.tryPoll(256)
	p.l.ctrl.pollCredits()
	return n > 0
}

// startWorkers runs the partition's goroutines for mode.
func (p *partition) startWorkers(mode Mode) {
	l := p.l
	run := func(round func() bool, wake chan struct{}) {
		defer l.closed.Done()
		var last time.Time
		parks := 0
		for l.alive() {
			if round() {
				last = time.Time{}
				parks = 0
				continue
			}
			if last.IsZero() {
				last = time.Now()
			}
			if time.Since(last) < time.Duration(l.spin) {
				runtime.Gosched()
				continue
			}
			// Both kinds of worker wait for the peer's writes: records,
			// and credit or ring space for the queued connections.
			if l.parkRemote(wake, nil, nil, parks, round) != nil {
				return
			}
			parks++
		}
	}
	switch mode {
	case SP2C:
		l.closed.Add(2)
		go run(p.txRound, p.sched.wake)
		go run(p.rxRound, p.rxWake)
	case SPSC:
		l.closed.Add(1)
		go run(func() bool {
			tx := p.txRound()
			return p.rxRound() || tx
		}, p.sched.wake)
	}
}
