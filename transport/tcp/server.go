package tcp

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/rdmakit/rdmakit/nic"
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

// conn is one incoming connection: the soft NIC serving a peer's
// requests. One goroutine reads, executes and answers, coalescing the
// answers to everything it found buffered into one write.
type conn struct {
	c   net.Conn
	out []byte
	err error
}

// Respond implements nic.Responder.
func (s *conn) Respond(r *nic.Response) {
	if r.Kind == nic.RespDrop {
		return // a request from the wrong peer gets nothing
	}
	s.out = appendResponse(s.out, r)
	if len(s.out) > maxOut {
		s.flush()
	}
}

func (s *conn) flush() {
	if len(s.out) == 0 || s.err != nil {
		return
	}
	_, s.err = s.c.Write(s.out)
	s.out = s.out[:0]
}

func (d *device) serve(c net.Conn) {
	defer c.Close()
	if d.opts.wrapConn != nil {
		c = d.opts.wrapConn(c)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if !d.track(c) {
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
	if raw, err := newRawReader(c); err == nil {
		fr.r = &spinReader{raw: raw, spin: d.opts.spin}
	} // else: a wrapped connection (tests) is read with blocking reads
	sess := d.node.NewSession(peer, h.address)
	defer sess.Close()
	s := &conn{c: c, out: make([]byte, 0, 64<<10)}
	var req nic.Request
	var pbuf [1][]byte
	for {
		typ, body, err := fr.next()
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
		if !fr.pending() {
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
