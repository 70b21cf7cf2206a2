package tcp

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// A connection carries requests both ways when it can: each side of a
// pair of nodes dials its own link, but a node whose peer already sends it
// requests on a connection it accepted sends its own requests to that peer
// on the same connection — one TCP stream per pair, like one RC
// connection. The dialer announces in its HELLO that it serves requests on
// its link (helloServes); its link's reader, which is the application
// goroutine polling a CQ whenever it can be, then executes them itself. A
// service that answers a SEND with a SEND (an echo) thus sends the answer
// on the stream the question came on, and the asker reads the answer —
// and the acknowledgement of its question — with the same read system
// call, on its own goroutine, without waking a serving goroutine: the
// echoed SEND's round trip is a READ's plus the answer's delivery.

// A served connection that delivered a message to this node's
// application, and carries this node's own requests too, waits a moment
// before it writes the acknowledgement: if the application answers the
// message at once (an echo, an RPC), the answer's request goes in the same
// write (takeRequests), and the peer reads the acknowledgement and the
// answer together. The wait is a few yields, bounded by answerWait, and
// only while such answers keep coming in time (answerScore).

// answerWait bounds the wait for an answer before an acknowledgement is
// written.
const answerWait = 20 * time.Microsecond

// answerScore decides whether to wait for answers: it stops after
// answerMisses deliveries in a row went unanswered in time, and then tries
// once every answerRetry deliveries.
type answerScore struct {
	misses  int
	skipped int
}

const (
	answerMisses = 4
	answerRetry  = 64
)

// try reports whether to wait for an answer to this delivery.
func (a *answerScore) try() bool {
	if a.misses < answerMisses {
		return true
	}
	a.skipped++
	if a.skipped >= answerRetry {
		a.skipped = 0
		return true
	}
	return false
}

// record counts whether the wait saw an answer.
func (a *answerScore) record(hit bool) {
	if hit {
		a.misses = 0
	} else {
		a.misses = min(a.misses+1, answerMisses)
	}
}

// delivers reports whether a request hands a message to the application:
// a SEND or a WRITE_WITH_IMM.
func delivers(r *nic.Request) bool {
	switch r.Opcode {
	case verbs.OpSend, verbs.OpSendWithImm, verbs.OpWriteWithImm:
		return true
	}
	return false
}

// awaitAnswer gives the application a moment to answer the messages just
// delivered on this connection, when this node's requests go on it too.
func (s *conn) awaitAnswer() {
	l := s.link.Load()
	if l == nil || !s.answers.try() {
		return
	}
	// Only this goroutine takes the routed link's responses, so pending
	// grows only by new requests meanwhile.
	l.mu.Lock()
	l.gather = true // until takeRequests, which the flush that follows runs
	l.mu.Unlock()
	p0 := l.pending.Load()
	start := nanotime()
	for l.pending.Load() == p0 && nanotime()-start < int64(answerWait) {
		runtime.Gosched()
	}
	s.answers.record(l.pending.Load() != p0)
}

// takeRequests moves the requests queued on the link routed through this
// connection, if no write of theirs is under way, into the write of
// replies about to happen, and ends the link's gather; s.wmu is held.
func (s *conn) takeRequests() {
	l := s.link.Load()
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	gathered := l.gather
	l.gather = false
	if l.writing || len(l.out) == 0 || l.dead || l.dev.blocked(l.address) {
		return
	}
	if len(s.out)+len(l.out) > cap(s.out) {
		if gathered {
			// Too large to share this write: its posters left them to it,
			// so they get a write of their own.
			go l.Flush()
		}
		return
	}
	s.out = append(s.out, l.out...)
	l.out = l.out[:0]
	l.queued = 0
	l.cond.Broadcast() // posters waiting for room in out
}

// servingWindow is how long after serving a request a link's pollers keep
// reading it with nothing of their own outstanding: an answer to what
// they sent may come as a request.
const servingWindow = int64(time.Millisecond)

// offer makes a served connection from the node at address available for
// this node's own requests to it.
func (d *device) offer(address string, s *conn) {
	d.smu.Lock()
	defer d.smu.Unlock()
	if d.served[address] == nil {
		d.served[address] = s
	}
}

// withdraw forgets a served connection that ends.
func (d *device) withdraw(address string, s *conn) {
	d.smu.Lock()
	defer d.smu.Unlock()
	if d.served[address] == s {
		delete(d.served, address)
	}
}

// route picks the connection l's requests go on, once, before its first
// request: a connection served from the same peer (the peer's own link),
// if the peer already sends requests on it from the host l reaches, and
// no other link uses it; else l's own connection (nil).
func (d *device) route(l *link) *conn {
	if !d.opts.share || l.conn == nil {
		return nil
	}
	d.smu.Lock()
	s := d.served[l.address]
	d.smu.Unlock()
	if s == nil || !s.requests.Load() || !sameHost(s.c.RemoteAddr(), l.conn.RemoteAddr()) {
		return nil
	}
	if !s.link.CompareAndSwap(nil, l) {
		return nil
	}
	return s
}

// sameHost reports whether two TCP addresses have the same IP.
func sameHost(a, b net.Addr) bool {
	ta, ok1 := a.(*net.TCPAddr)
	tb, ok2 := b.(*net.TCPAddr)
	return ok1 && ok2 && ta.IP.Equal(tb.IP)
}

// writeShared writes a link's requests on a served connection, between
// the connection's own writes of responses, with its deadline.
func (s *conn) writeShared(buf []byte, l *link) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for len(buf) > 0 {
		s.arm()
		k := min(len(buf), writeChunk)
		if _, err := s.c.Write(buf[:k]); err != nil {
			return err
		}
		if k == writeChunk {
			l.lastBulk.Store(time.Now().UnixNano())
		}
		buf = buf[k:]
	}
	return nil
}

// arm moves the write deadline when it is an eighth of the timeout old;
// s.wmu is held.
func (s *conn) arm() {
	if now := time.Now(); now.Sub(s.armed) > s.timeout/8 {
		s.armed = now
		s.c.SetWriteDeadline(now.Add(s.timeout))
	}
}

// takeResponse handles a RESPONSE on a served connection: it answers a
// request of the link routed through it. Anything else is a protocol
// error, as before links were shared.
func (s *conn) takeResponse(body []byte) error {
	l := s.link.Load()
	if l == nil {
		return fmt.Errorf("%w: a response on a connection that carries no requests of this node", ErrProtocol)
	}
	if err := decodeResponse(body, &s.resp); err != nil {
		return err
	}
	l.pending.Add(-1)
	l.resps.Add(1)
	l.dev.node.HandleResponse(l, &s.resp)
	s.resp.Data = nil
	return nil
}

// serveRequest executes a request the peer sent on this link; the caller
// holds tok. The link's responder is made on the first one.
func (l *link) serveRequest(body []byte) error {
	if err := decodeRequest(body, &l.req, &l.pbuf); err != nil {
		return err
	}
	if l.sess == nil {
		if l.peerAddr == "" {
			return fmt.Errorf("%w: a request on a link to %s, which did not say its address", ErrProtocol, l.address)
		}
		l.mu.Lock()
		dead := l.dead
		if !dead {
			l.peerID = l.dev.peers.Add(l.peerAddr)
			l.sess = l.dev.node.NewSession(l.peerID, l.peerAddr)
		}
		l.mu.Unlock()
		if dead {
			return errors.New("link closed")
		}
	}
	l.servedAt.Store(nanotime())
	l.sess.Serve(&l.req, l)
	l.req.Payload, l.pbuf[0] = nil, nil
	return nil
}

// Respond implements nic.Responder for the requests the peer sends on
// this link: the response is written after the frames at hand are
// handled (answer).
func (l *link) Respond(r *nic.Response) {
	if r.Kind == nic.RespDrop {
		return // a request from the wrong peer gets nothing
	}
	l.rout = appendResponse(l.rout, r)
}

// answer sends the responses (and PONGs) the reader made. The reader must
// not wait for the network: the peer may be waiting to write its own
// answers to this node before it reads any more. So it writes without
// blocking what the socket takes and leaves the rest to a Flush on
// another goroutine; it waits only while more than maxPending bytes are
// queued (a peer that reads none of them loses the connection to its own
// write deadline).
func (l *link) answer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.out) >= maxPending && !l.dead {
		l.cond.Wait()
	}
	if l.dead {
		l.rout = l.rout[:0]
		return
	}
	l.out = append(l.out, l.rout...)
	l.rout = l.rout[:0]
	if l.writing || l.dev.blocked(l.address) {
		return // the write in progress takes them, or the fault's end
	}
	n, err := l.raw.writeNB(l.out)
	if err != nil {
		go l.fail(err)
		return
	}
	l.out = l.out[:copy(l.out, l.out[n:])]
	if len(l.out) == 0 {
		l.queued = 0
		return
	}
	go l.Flush()
}

// closeShared releases what sharing holds when the link fails: its
// responder and peer number, and a served connection it was routed
// through (its peer is gone too).
func (l *link) closeShared() {
	l.mu.Lock()
	sess := l.sess // a reader may still use it: it is not taken away
	l.mu.Unlock()
	if sess != nil {
		sess.Close()
		l.dev.peers.Drop(l.peerID)
	}
	if s := l.via.Load(); s != nil {
		s.c.Close()
	}
}
