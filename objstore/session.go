package objstore

import (
	"context"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// SubscriptionBuffer bounds the sealed-object notices queued for one
// client at the store, and those a Subscription holds unread at the
// client: a subscriber further behind is dropped (ErrLagged), never
// waited for.
const SubscriptionBuffer = 4096

// session is the store's side of one client connection (or, with a nil
// conn, the store's own Sink). The fields under "s.mu" belong to the
// store's lock; the output queue has its own lock (taken after s.mu,
// never before).
type session struct {
	s    *Store
	id   uint64
	conn *net.UnixConn
	raw  syscall.RawConn // conn's descriptor, for send's non-blocking write
	try  tryWriter       // under outMu

	// Under s.mu.
	refs    map[ID]int          // references held, by object
	created map[ID]*entry       // unsealed objects it created
	waiters map[uint32]*waiter  // blocked Gets by reqID
	fetches map[uint32]func()   // running Fetches' cancel functions by reqID
	subs    map[uint32]struct{} // subscriptions by reqID

	// The output queue, drained by the writer goroutine.
	outMu   sync.Mutex
	out     [][]byte // reply frames, at most MaxOutstanding (one per admitted request)
	notes   []note   // subscription notices, at most SubscriptionBuffer (+ lagged notices)
	writing bool     // under outMu: the writer goroutine is writing frames it took
	wake    chan struct{}
	slots   chan struct{} // one token per admitted, unanswered request
	done    chan struct{}
	closer  sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
}

// note is a store-initiated frame: a sealed ID for a subscription, or the
// notice that it lagged.
type note struct {
	typ   byte
	reqID uint32
	id    ID
}

func newSession(s *Store, id uint64, conn *net.UnixConn) *session {
	ctx, cancel := context.WithCancel(context.Background())
	c := &session{
		s: s, id: id, conn: conn,
		refs: map[ID]int{}, created: map[ID]*entry{}, waiters: map[uint32]*waiter{},
		fetches: map[uint32]func(){}, subs: map[uint32]struct{}{},
		wake: make(chan struct{}, 1), slots: make(chan struct{}, s.cfg.MaxOutstanding),
		done: make(chan struct{}), ctx: ctx, cancel: cancel,
	}
	if conn != nil {
		c.raw, _ = conn.SyscallConn() // nil on error: send always queues
		c.try.write = c.try.writeFD
	}
	return c
}

// send queues a reply frame (its request holds a slot, so the queue never
// exceeds MaxOutstanding).
//
// When nothing is queued and the writer goroutine is idle, send first
// tries one non-blocking write itself: a reply then leaves without a
// hand-over to the writer (which costs a wake-up of another thread, tens
// of microseconds on a small machine when the process is idle). What the
// socket does not take at once goes to the writer as usual, so send
// never blocks, also under s.mu.
func (c *session) send(frame []byte) {
	c.outMu.Lock()
	if c.raw != nil && len(c.out) == 0 && len(c.notes) == 0 && !c.writing {
		n := c.tryWrite(frame)
		if n == len(frame) {
			c.outMu.Unlock()
			<-c.slots
			return
		}
		frame = frame[n:]
	}
	c.out = append(c.out, frame)
	c.outMu.Unlock()
	c.poke()
}

// tryWrite writes what the socket takes of frame without waiting and
// returns how much that was (0 on any error: the writer meets it again).
// It runs under outMu; the function given to the raw connection is made
// once per session, so a reply allocates nothing here.
func (c *session) tryWrite(frame []byte) int {
	c.try.frame, c.try.n = frame, 0
	_ = c.raw.Write(c.try.write)
	n := c.try.n
	c.try.frame = nil
	return n
}

// tryWriter is tryWrite's state: the frame, how much of it went, and the
// function the raw connection calls with the descriptor.
type tryWriter struct {
	frame []byte
	n     int
	write func(fd uintptr) bool
}

func (t *tryWriter) writeFD(fd uintptr) bool {
	for t.n < len(t.frame) {
		m, err := unix.Write(int(fd), t.frame[t.n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		t.n += m
	}
	return true // never wait for the socket to become writable
}

// notify queues the notice that id was sealed for each of c's
// subscriptions, or drops them all (with a lagged notice each) when
// their queue is full. It runs under s.mu.
func (c *session) notify(id ID) {
	c.outMu.Lock()
	lagged := len(c.notes)+len(c.subs) > SubscriptionBuffer
	for reqID := range c.subs {
		if lagged {
			c.notes = append(c.notes, note{typ: msgLagged, reqID: reqID})
		} else {
			c.notes = append(c.notes, note{typ: msgNotify, reqID: reqID, id: id})
		}
	}
	c.outMu.Unlock()
	if lagged {
		c.s.log.Warn("objstore: subscriber lagged, dropped", "client", c.id, "subscriptions", len(c.subs))
		c.s.subscribers -= len(c.subs)
		clear(c.subs)
		delete(c.s.subscribed, c)
	}
	c.poke()
}

func (c *session) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pending is the number of admitted requests not answered yet (their
// replies queued, being written, or to come).
func (c *session) pending() int { return len(c.slots) }

// appendNote appends n's frame to b.
func appendNote(b []byte, n note) []byte {
	f := frame(b).u8(n.typ).u32(n.reqID)
	if n.typ == msgNotify {
		return f.u32(IDSize).id(n.id)
	}
	return f.u32(0)
}

// writer writes queued frames to the client until the session closes.
// It frees one admission slot per reply written.
func (c *session) writer() {
	var bufs net.Buffers
	var scratch []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.outMu.Lock()
		out, notes := c.out, c.notes
		c.out, c.notes = nil, nil
		c.writing = len(out)+len(notes) > 0
		c.outMu.Unlock()
		bufs = bufs[:0]
		bufs = append(bufs, out...)
		scratch = scratch[:0]
		for _, n := range notes {
			scratch = appendNote(scratch, n)
		}
		if len(scratch) > 0 {
			bufs = append(bufs, scratch)
		}
		if len(bufs) == 0 {
			continue
		}
		_, err := bufs.WriteTo(c.conn)
		c.outMu.Lock()
		c.writing = false
		more := len(c.out)+len(c.notes) > 0
		c.outMu.Unlock()
		if err != nil {
			c.s.log.Debug("objstore: write to client", "client", c.id, "err", err)
			c.close()
			return
		}
		for range out {
			<-c.slots
		}
		if more {
			c.poke()
		}
	}
}

// close ends the session: its connection closes, so its reader and
// writer stop.
func (c *session) close() {
	c.closer.Do(func() {
		close(c.done)
		c.cancel()
		if c.conn != nil {
			c.conn.Close()
		}
	})
}
