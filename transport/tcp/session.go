package tcp

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// maxOut is how many response bytes a serving connection gathers before
// it writes even though more requests are buffered.
const maxOut = 64 << 10

// accept serves incoming connections until the listener closes.
func (d *device) accept() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			if !d.closed.Load() {
				slog.Warn("tcp accept", "addr", d.node.Address(), "err", err)
			}
			return
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.serve(c)
		}()
	}
}

// session is one incoming connection: the soft NIC serving a peer's
// requests (the role shm's session plays; the connections this node
// dialed are its links). One goroutine reads, executes and answers,
// coalescing the answers to everything it found buffered into one write.
type session struct {
	c   net.Conn
	w   io.Writer // c, or a quietConn on c's socket
	out []byte
	// base is out's own buffer. Only a READ reply too large for it
	// replaces out with a larger buffer, its capacity reserved from the
	// node's budget; after the write it stays in hold for the next such
	// reply until another connection needs the budget.
	base []byte
	hold *hold
	// Replies are written with a deadline: a peer that reads nothing for
	// timeout loses the connection. The deadline is moved before a write
	// when it is an eighth of timeout old.
	timeout time.Duration
	armed   time.Time
	err     error
}

// Respond implements nic.Responder. It only copies the reply: the serve
// loop writes it after nic.Session.Serve returns, once the memory region a
// READ reply comes from is released, so that a peer that stops reading
// cannot hold the region (MR.Deregister waits for it).
func (s *session) Respond(r *nic.Response) {
	if r.Kind == nic.RespDrop {
		return // a request from the wrong peer gets nothing
	}
	s.out = appendResponse(s.out, r)
}

// makeRoom prepares out for a READ reply of n bytes: it writes what out
// holds if the reply would not fit after it, and takes a buffer reserved
// from the budget when the reply fits none at hand.
func (s *session) makeRoom(n int) error {
	const overhead = 64 // frame and response headers
	if len(s.out)+n+overhead <= cap(s.out) {
		return nil
	}
	s.flush()
	if s.err != nil || n+overhead <= cap(s.out) {
		return s.err
	}
	buf, err := s.hold.get(n + overhead)
	if err != nil {
		return err
	}
	if buf == nil {
		buf = make([]byte, 0, n+overhead)
	}
	s.out = buf
	return nil
}

func (s *session) flush() {
	if len(s.out) == 0 || s.err != nil {
		return
	}
	// A large reply goes in chunks, each with the whole timeout: a peer
	// that reads slowly is not one that reads nothing.
	for b := s.out; len(b) > 0 && s.err == nil; {
		if now := time.Now(); now.Sub(s.armed) > s.timeout/8 {
			s.armed = now
			s.c.SetWriteDeadline(now.Add(s.timeout))
		}
		k := min(len(b), writeChunk)
		_, s.err = s.w.Write(b[:k])
		b = b[k:]
	}
	if cap(s.out) > cap(s.base) {
		s.hold.put(s.out)
	}
	s.out = s.base[:0]
}

func (d *device) serve(c net.Conn) {
	defer c.Close()
	if d.opts.wrapConn != nil {
		c = d.opts.wrapConn(c)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	switch d.track(c) {
	case trackClosed:
		return
	case trackFull:
		// A refusal is counted before the peer can see it.
		d.refuse(c, fmt.Errorf("%w: %d connections (maxconns)", ErrRejected, d.opts.maxConns))
		// Untracked, so Close does not end it: a short deadline (the
		// frame fits any fresh socket's buffer anyway).
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(appendReject(nil, rejectBusy, "too many connections"))
		return
	}
	defer d.untrack(c)
	c.SetDeadline(time.Now().Add(d.opts.dialTimeout))
	fr := newFrameReader(c, 64<<10, maxHandshake)
	typ, body, err := fr.next()
	if err != nil || typ != frameHello {
		d.refuse(c, fmt.Errorf("%w: no hello (type %d): %v", ErrProtocol, typ, err))
		return
	}
	h, err := decodeHello(body)
	if err != nil {
		d.refuse(c, err)
		return
	}
	// A refusal is counted before the peer can see it.
	if h.version != Version {
		d.refuse(c, fmt.Errorf("%w: version %d", ErrRejected, h.version))
		c.Write(appendReject(nil, rejectVersion, fmt.Sprintf("version %d not supported (want %d)", h.version, Version)))
		return
	}
	if subtle.ConstantTimeCompare([]byte(h.token), []byte(d.opts.token)) != 1 {
		d.refuse(c, fmt.Errorf("%w: bad auth token from %s", ErrRejected, c.RemoteAddr()))
		c.Write(appendReject(nil, rejectToken, "bad auth token"))
		return
	}
	peer := d.peers.Add(h.address)
	if _, err := c.Write(appendWelcome(nil, &welcome{version: Version, peerID: peer, address: d.node.Address()})); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	fr.max = maxFrame
	fr.limit(d.budget, 5*d.opts.keepalive, c.SetReadDeadline)
	defer fr.free()
	base := make([]byte, 0, maxOut+4<<10)
	s := &session{c: c, w: c, out: base, base: base, hold: newHold(d.budget), timeout: 5 * d.opts.keepalive}
	defer s.hold.close()
	// With spin=0 the connection is read as any net.Conn is: a read that
	// finds nothing parks the goroutine in the runtime's poller, and the
	// next read follows the wake-up. A spinReader would look at the socket
	// once more (poll(2)) before parking: one system call more per frame
	// batch, for a peer that is answered the same. Reads and writes are
	// raw system calls (quietio.go).
	if q, err := newQuietConn(c); err == nil {
		s.w, fr.r = q, q
		if raw, err := newRawReader(c); err == nil && d.opts.spin > 0 {
			fr.r = &spinReader{raw: raw, spin: d.opts.spin}
		}
	} // else: a wrapped connection (tests), read and written as it is
	sess := d.node.NewSession(peer, h.address)
	defer sess.Close()
	var req nic.Request
	var pbuf [1][]byte
	for {
		typ, body, err := fr.next()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			d.refuse(c, fmt.Errorf("%w: no byte of a large frame for %v", ErrProtocol, 5*d.opts.keepalive))
			return
		}
		if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrProtocol) {
			d.refuse(c, err)
			return
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !d.closed.Load() {
				slog.Debug("tcp connection ends", "peer", h.address, "err", err)
			}
			return
		}
		if d.faults.any.Load() {
			s.flush() // answers already made go out before the fault holds the rest
			d.waitOpen(h.address)
		}
		switch typ {
		case frameRequest:
			if err := decodeRequest(body, &req, &pbuf); err != nil {
				d.refuse(c, err)
				return
			}
			if req.Opcode == verbs.OpRead && !req.Datagram {
				if err := s.makeRoom(int(req.Length)); err != nil {
					return
				}
			}
			sess.Serve(&req, s)
			req.Payload, pbuf[0] = nil, nil
		case framePing:
			if len(body) != 8 {
				d.refuse(c, fmt.Errorf("%w: ping of %d bytes", ErrProtocol, len(body)))
				return
			}
			s.out = appendFrameHeader(s.out, framePong, 8)
			s.out = append(s.out, body...)
		default:
			d.refuse(c, fmt.Errorf("%w: frame type %d", ErrProtocol, typ))
			return
		}
		if len(s.out) > maxOut || !fr.pending() {
			s.flush()
		}
		if s.err != nil {
			return
		}
	}
}

// refuse logs why a connection is dropped; the caller closes it. Other
// connections are unaffected.
func (d *device) refuse(c net.Conn, err error) {
	d.refused.Add(1)
	slog.Warn("tcp connection refused", "addr", d.node.Address(), "peer", c.RemoteAddr(), "err", err)
}
