package cm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Defaults of ListenConfig.
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultBacklog          = 128
)

// ListenConfig configures a Listener. The zero value is ready to use.
type ListenConfig struct {
	// HandshakeTimeout bounds each step the listener takes without the
	// application: receiving a dialer's REQ, waiting in the backlog for
	// Accept, sending a REJ, and (together with Request.Accept's context)
	// waiting for the dialer's RTU. Zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Backlog is the number of received requests waiting for Accept.
	// Zero means DefaultBacklog.
	Backlog int
	// Logger receives the listener's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Listener accepts connection requests on a TCP side channel for one
// device.
type Listener struct {
	dev     verbs.Device
	ln      net.Listener
	timeout time.Duration
	log     *slog.Logger
	reqs    chan *Request
	done    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // side-channel connections not yet finished
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// Listen is ListenConfig{}.Listen.
func Listen(ctx context.Context, dev verbs.Device, addr string) (*Listener, error) {
	var lc ListenConfig
	return lc.Listen(ctx, dev, addr)
}

// Listen listens on the TCP address addr ("host:port"; port 0 picks a
// free one, see Listener.Addr) for dialers that want a QP connected to
// one on dev. ctx bounds only the setup of the listening socket. The
// listener serves until Close.
func (lc *ListenConfig) Listen(ctx context.Context, dev verbs.Device, addr string) (*Listener, error) {
	var nlc net.ListenConfig
	ln, err := nlc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cm: listen: %w", err)
	}
	l := &Listener{
		dev:     dev,
		ln:      ln,
		timeout: lc.HandshakeTimeout,
		log:     lc.Logger,
		reqs:    make(chan *Request, cmp.Or(max(lc.Backlog, 0), DefaultBacklog)),
		done:    make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
	}
	if l.timeout <= 0 {
		l.timeout = DefaultHandshakeTimeout
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.log = l.log.With("cm", "listener", "addr", ln.Addr().String(), "device", dev.Address())
	l.wg.Add(1)
	go l.serve()
	l.log.Debug("cm: listening")
	return l, nil
}

// Addr returns the listener's TCP address, "host:port", with the real
// port when 0 was asked for. Dialers pass it to Dial.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Device returns the device whose QPs the listener connects.
func (l *Listener) Device() verbs.Device { return l.dev }

// Accept waits for the next well-formed connection request and returns
// it; the caller inspects it and must answer it with Request.Accept or
// Request.Reject. Malformed exchanges never reach Accept: the listener
// answers them with a protocol error, logs them and keeps serving. Accept
// returns ErrClosed after Close and ctx's error when ctx ends first.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	select {
	case <-l.done:
		return nil, ErrClosed
	default:
	}
	select {
	case r := <-l.reqs:
		select {
		case <-l.done: // Close won the race: the request is aborted
			return nil, ErrClosed
		default:
			return r, nil
		}
	case <-l.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("cm: accept: %w", ctx.Err())
	}
}

// AcceptConn accepts the next request unconditionally with opts: Accept
// followed by Request.Accept. An error from Request.Accept concerns that
// one exchange only (e.g. the dialer went away); the listener keeps
// serving.
func (l *Listener) AcceptConn(ctx context.Context, opts Options) (*Conn, error) {
	r, err := l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return r.Accept(ctx, opts)
}

// Close stops the listener: it closes the listening socket, aborts every
// exchange in progress (their dialers fail) and waits for the listener's
// goroutines to end. Requests already returned by Accept and not yet
// answered fail. Connections already established are not affected.
// Close is idempotent.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.done)
		for c := range l.conns {
			_ = c.Close()
		}
		l.mu.Unlock()
		l.closeErr = l.ln.Close()
		l.wg.Wait()
		l.log.Debug("cm: closed")
	})
	return l.closeErr
}

// track registers a side-channel connection so Close can abort it; it
// reports false (and closes c) when the listener is closed.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// finish closes and forgets a side-channel connection.
func (l *Listener) finish(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	_ = c.Close()
}

// serve is the accept loop.
func (l *Listener) serve() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (e.g. out of file descriptors):
			// back off and retry, like net/http.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.log.Warn("cm: accept failed; retrying", "err", err, "in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		if !l.track(c) {
			return
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// handshake receives one dialer's REQ and queues it for Accept. Malformed
// input is answered with a protocol REJ and dropped.
func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	log := l.log.With("dialer", c.RemoteAddr().String())
	_ = c.SetDeadline(time.Now().Add(l.timeout))
	m, err := readMessage(c)
	if err == nil && m.Type != msgREQ {
		err = protoErr("got %v, want REQ", m.Type)
	}
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			reject(c, codeProtocol, err.Error())
			log.Warn("cm: bad connection request", "err", err)
			drain(c)
		} else {
			log.Info("cm: connection request not received", "err", err)
		}
		l.finish(c)
		return
	}
	if want := l.dev.Attr().Transport; m.Transport != want {
		reason := fmt.Sprintf("dialer's device is %q, listener's is %q", m.Transport, want)
		reject(c, codeFailed, reason)
		log.Warn("cm: connection request refused", "reason", reason)
		l.finish(c)
		return
	}
	r := &Request{l: l, c: c, req: m, log: log.With("peer", m.Address, "peer_qpn", m.QPN)}
	t := time.NewTimer(l.timeout)
	defer t.Stop()
	select {
	case l.reqs <- r:
		r.log.Debug("cm: connection request queued")
	case <-l.done:
		r.abandon(codeUnavailable, "listener closed")
	case <-t.C:
		r.abandon(codeUnavailable, "listener did not accept in time")
	}
}

// Request is a dialer's connection request, received by Listener.Accept.
// Answer it exactly once with Accept or Reject.
type Request struct {
	l        *Listener
	c        net.Conn
	req      message
	log      *slog.Logger
	answered atomic.Bool
}

// PrivateData returns the private data the dialer sent (nil if none).
func (r *Request) PrivateData() []byte { return r.req.PrivateData }

// PeerAddress returns the dialer's device address.
func (r *Request) PeerAddress() string { return r.req.Address }

// PeerQPN returns the number of the dialer's QP.
func (r *Request) PeerQPN() uint32 { return r.req.QPN }

// SideChannelAddr returns the TCP address the dialer connected from.
func (r *Request) SideChannelAddr() net.Addr { return r.c.RemoteAddr() }

// abandon answers a request the application never saw.
func (r *Request) abandon(code rejectCode, reason string) {
	r.answered.Store(true)
	_ = r.c.SetWriteDeadline(time.Now().Add(r.l.timeout))
	reject(r.c, code, reason)
	r.log.Info("cm: connection request dropped", "reason", reason)
	r.l.finish(r.c)
}

// Reject refuses the request; the dialer's Dial returns a *RejectedError
// with reason (truncated to MaxReasonLen bytes).
func (r *Request) Reject(reason string) error {
	if r.answered.Swap(true) {
		return ErrAnswered
	}
	defer r.l.finish(r.c)
	_ = r.c.SetDeadline(time.Now().Add(r.l.timeout))
	if err := writeMessage(r.c, &message{Type: msgREJ, Code: codeRejected, Reason: truncateReason(reason)}); err != nil {
		return fmt.Errorf("cm: reject: %w", err)
	}
	r.log.Debug("cm: connection request rejected", "reason", reason)
	return nil
}

// Accept creates a QP on the listener's device with opts, connects it to
// the dialer's QP (RESET → INIT → RTR → RTS), sends the reply with
// opts.PrivateData and waits for the dialer's confirmation. It returns
// only a completed connection; on failure the QP is destroyed and the
// dialer is told. ctx (capped by ListenConfig.HandshakeTimeout) bounds
// the wait for the dialer.
func (r *Request) Accept(ctx context.Context, opts Options) (*Conn, error) {
	if r.answered.Swap(true) {
		return nil, ErrAnswered
	}
	defer r.l.finish(r.c)
	select {
	case <-r.l.done:
		return nil, ErrClosed
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, r.l.timeout)
	defer cancel()
	stop := watch(ctx, r.c)
	defer stop()
	if err := opts.check(); err != nil {
		reject(r.c, codeFailed, "listener: "+err.Error())
		return nil, err
	}

	qp, err := opts.createQP()
	if err != nil {
		reject(r.c, codeFailed, "listener: "+err.Error())
		return nil, err
	}
	c, err := r.exchange(ctx, qp, &opts)
	if err != nil {
		err = errors.Join(err, destroy(qp))
		r.log.Info("cm: accept failed", "err", err)
		return nil, err
	}
	r.log.Debug("cm: connected", "qpn", qp.QPN())
	return c, nil
}

// exchange runs the listener's side of REP / RTU for qp.
func (r *Request) exchange(ctx context.Context, qp verbs.QP, opts *Options) (*Conn, error) {
	if err := opts.connect(qp, r.req.Address, r.req.QPN); err != nil {
		reject(r.c, codeFailed, "listener: "+err.Error())
		return nil, err
	}
	rep := message{
		Type:        msgREP,
		QPN:         qp.QPN(),
		Transport:   r.l.dev.Attr().Transport,
		Address:     r.l.dev.Address(),
		PrivateData: opts.PrivateData,
	}
	if err := writeMessage(r.c, &rep); err != nil {
		return nil, ioErr(ctx, "send REP", err)
	}
	m, err := readMessage(r.c)
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			reject(r.c, codeProtocol, err.Error())
			return nil, err
		}
		return nil, ioErr(ctx, "await RTU", err)
	}
	switch m.Type {
	case msgRTU:
	case msgREJ:
		return nil, m.err()
	default:
		err := protoErr("got %v, want RTU or REJ", m.Type)
		reject(r.c, codeProtocol, err.Error())
		return nil, err
	}
	return &Conn{
		qp:       qp,
		peerAddr: r.req.Address,
		peerQPN:  r.req.QPN,
		peerData: r.req.PrivateData,
		sideAddr: r.c.RemoteAddr(),
	}, nil
}

// drain half-closes c and discards what the peer still sends, for a
// short while, so that closing c with unread input does not reset the
// connection before the peer has read our REJ.
func drain(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
}
