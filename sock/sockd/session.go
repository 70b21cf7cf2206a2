package sockd

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// clientSession is a Client's registration: one connection to the daemon
// carrying a listener's Admit requests (replies matched by id) and
// Releases (merged, fire and forget).
type clientSession struct {
	conn net.Conn
	wmu  sync.Mutex // one writer at a time

	mu      sync.Mutex
	pending map[uint32]*call
	nextID  uint32
	rel     map[relKey]int // releases not yet sent
	err     error          // why the session ended; nil while it lives

	relSig chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup
}

// call is a request waiting for its reply.
type call struct {
	ch        chan msg
	app       string // an ADMIT's dialing application
	abandoned bool   // its caller gave up: an ADMITTED is released at once
}

// maxPending bounds the requests waiting for replies.
const maxPending = 4096

type relKey struct {
	app  string
	part int
}

func newClientSession(conn net.Conn) *clientSession {
	s := &clientSession{
		conn: conn, pending: map[uint32]*call{}, nextID: 1, rel: map[relKey]int{},
		relSig: make(chan struct{}, 1), done: make(chan struct{}),
	}
	s.wg.Add(2)
	go s.read()
	go s.flushLoop()
	return s
}

// close ends the registration: the daemon releases everything it held.
func (s *clientSession) close() {
	s.fail(fmt.Errorf("sockd: registration closed: %w", net.ErrClosed))
	s.wg.Wait()
}

// fail ends the session with err and wakes every waiting request.
func (s *clientSession) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	for id, c := range s.pending {
		close(c.ch)
		delete(s.pending, id)
	}
	s.mu.Unlock()
	close(s.done)
	s.conn.Close()
}

// read dispatches replies to their requests until the connection ends.
func (s *clientSession) read() {
	defer s.wg.Done()
	buf := make([]byte, maxFrame)
	for {
		m, err := readMsg(s.conn, buf, maxFrame)
		if err != nil {
			s.fail(fmt.Errorf("sockd: connection to the daemon: %w", err))
			return
		}
		if m.typ == msgError && m.id == 0 {
			s.fail(fmt.Errorf("sockd: the daemon ended the registration: %w", replyError(m)))
			return
		}
		s.mu.Lock()
		c := s.pending[m.id]
		delete(s.pending, m.id)
		abandoned := c != nil && c.abandoned
		switch {
		case abandoned:
			s.releaseAdmitted(c, m)
		case c != nil:
			c.ch <- m // buffered: never blocks; under mu, so request sees it if it gives up
		}
		s.mu.Unlock()
		switch {
		case c == nil:
			s.fail(fmt.Errorf("%w: reply to no request (id %d)", ErrProtocol, m.id))
			return
		case abandoned:
			s.signalRelease()
		}
	}
}

// request sends m and waits for its reply.
func (s *clientSession) request(ctx context.Context, m msg) (msg, error) {
	c := &call{ch: make(chan msg, 1), app: m.app}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return msg{}, err
	}
	if len(s.pending) >= maxPending {
		s.mu.Unlock()
		return msg{}, fmt.Errorf("%w: %d requests waiting for the daemon", ErrFull, maxPending)
	}
	m.id = s.nextID
	s.nextID++
	if s.nextID == 0 {
		s.nextID = 1
	}
	s.pending[m.id] = c
	s.mu.Unlock()
	if err := s.write(&m); err != nil {
		s.fail(fmt.Errorf("sockd: connection to the daemon: %w", err))
	}
	select {
	case r, ok := <-c.ch:
		if !ok {
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			return msg{}, err
		}
		return r, nil
	case <-ctx.Done():
		// The reply may still come: the reader then releases what the
		// daemon admitted for nobody.
		s.mu.Lock()
		c.abandoned = true
		select {
		case r, ok := <-c.ch:
			if ok {
				s.releaseAdmitted(c, r)
			}
		default:
		}
		s.mu.Unlock()
		s.signalRelease()
		return msg{}, ctx.Err()
	}
}

// releaseAdmitted queues the release of what an abandoned ADMIT got, if
// it got anything. s.mu is held.
func (s *clientSession) releaseAdmitted(c *call, reply msg) {
	if reply.typ == msgAdmitted && s.err == nil && len(s.rel) < MaxApps {
		s.rel[relKey{c.app, int(reply.part)}]++
	}
}

// release queues a release; the flusher sends it.
func (s *clientSession) release(app string, part int) {
	s.mu.Lock()
	if s.err == nil && len(s.rel) < MaxApps {
		s.rel[relKey{app, part}]++
	}
	s.mu.Unlock()
	s.signalRelease()
}

// signalRelease wakes the flusher.
func (s *clientSession) signalRelease() {
	select {
	case s.relSig <- struct{}{}:
	default:
	}
}

// takeReleases appends the queued releases' frames to b and empties the
// queue.
func (s *clientSession) takeReleases(b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.rel {
		b = (&msg{typ: msgRelease, app: k.app, part: int32(k.part), count: uint32(n)}).encode(b)
		delete(s.rel, k)
	}
	return b
}

// write writes the queued releases and then m (if not nil) in one write:
// the daemon sees every Release queued before an Admit first.
func (s *clientSession) write(m *msg) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.takeReleases(nil)
	if m != nil {
		b = m.encode(b)
	}
	if len(b) == 0 {
		return nil
	}
	s.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := s.conn.Write(b)
	return err
}

func (s *clientSession) flushLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.relSig:
		}
		if err := s.write(nil); err != nil {
			s.fail(fmt.Errorf("sockd: connection to the daemon: %w", err))
			return
		}
	}
}
