package sock

import (
	"runtime"
	"sync"
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

// txQueue is a connection's send queue in SP2C and SPSC.
type txQueue struct {
	c      *Conn
	mu     sync.Mutex
	q      byteRing
	limit  int
	queued bool // on the scheduler's list
	fin    bool // send FIN once the queue is empty
	space  waitq
}

func (t *txQueue) init(c *Conn) {
	t.c = c
	t.limit = c.sndbuf
}

func (t *txQueue) setLimit(n int) {
	t.mu.Lock()
	t.limit = n
	t.mu.Unlock()
	t.space.broadcast()
}

// schedule puts the connection on its partition's list; the caller holds mu.
func (t *txQueue) schedule() {
	if !t.queued && (t.q.len() > 0 || t.fin) {
		t.queued = true
		t.c.part.sched.add(t.c)
	}
}

// kick reschedules a connection that waited for credit.
func (t *txQueue) kick() {
	if t.c == nil || t.c.l.ep.cfg.Mode == Direct {
		return
	}
	t.mu.Lock()
	t.schedule()
	t.mu.Unlock()
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
		ch := t.space.wait()
		t.mu.Lock()
		n := min(len(b), t.limit-t.q.len())
		if n > 0 {
			t.q.write(b[:n])
			t.schedule()
		}
		t.mu.Unlock()
		total += n
		b = b[n:]
		if n > 0 || len(b) == 0 {
			continue
		}
		if err := park(ch, c.wd, c.closed, c.l.done, parks); err != nil {
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
	t.mu.Lock()
	t.fin = true
	t.schedule()
	t.mu.Unlock()
	return nil
}

// stop drops what is queued (Close with a reset, or the link's end).
func (t *txQueue) stop() { t.space.broadcast() }

// txTurn gives connection c its turn on partition p: at most the batch
// limit of records from its queue. It reports whether it sent anything.
func (p *partition) txTurn(c *Conn) bool {
	t := &c.txq
	t.mu.Lock()
	a, b := t.q.peek(t.q.len())
	fin := t.fin
	t.mu.Unlock()
	sent := 0
	var err error
	if len(a)+len(b) > 0 {
		if !p.lock(nil, nil) {
			return false
		}
		sent, err = c.sendBatch(a, b)
		p.unlock()
	}
	t.mu.Lock()
	t.q.discard(sent)
	t.queued = false
	finNow := false
	if t.q.len() == 0 && fin && err == nil {
		t.fin = false
		finNow = true
	} else if err == nil && c.avail() > 0 {
		t.schedule() // more data and credit: back of the line
	}
	t.mu.Unlock()
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
	run := func(round func() bool, announce bool) {
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
			if announce && l.ctrl.announceSleep() != nil {
				return
			}
			if round() {
				continue
			}
			park(p.sched.wake, nil, nil, l.done, parks)
			parks++
		}
	}
	switch mode {
	case SP2C:
		l.closed.Add(2)
		go run(p.txRound, false)
		go run(p.rxRound, true)
	case SPSC:
		l.closed.Add(1)
		go run(func() bool {
			tx := p.txRound()
			return p.rxRound() || tx
		}, true)
	}
}
