package tcp

import (
	"fmt"
	"net"
	"time"
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
