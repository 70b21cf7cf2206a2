package sock

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/shm" // shm://
	_ "github.com/rdmakit/rdmakit/transport/tcp" // tcp://
)

// An endpoint is one verbs device with the links to other endpoints: a
// listener's, or a dialer's for one transport.
type endpoint struct {
	cfg  Config
	log  *slog.Logger
	app  string
	addr Addr // the listener's address; the dialer's local device otherwise
	dev  verbs.Device
	pd   verbs.PD
	ln   *Listener // nil for dialers

	mu      sync.Mutex
	links   map[*link]struct{}
	closing bool        // after Listener.Close or Dialer.Close: ends with its last link
	closed  atomic.Bool // closing, readable under a link's mu (lock order: ep.mu, then l.mu)

	released  sync.WaitGroup // links not yet released
	closeOnce sync.Once
}

type linkDial struct {
	done chan struct{}
	l    *link
	err  error
}

var devSeq atomic.Uint64

// openEndpoint opens the device of an endpoint for transport ("shm" or
// "tcp"); host is the tcp device's host.
func openEndpoint(cfg Config, transport, host string) (*endpoint, error) {
	cfg, err := cfg.forTransport(transport)
	if err != nil {
		return nil, err
	}
	var uri string
	switch transport {
	case "shm":
		// The device's rings carry only doorbells; their size also sets
		// the largest WRITE (a quarter: 256 KiB).
		uri = fmt.Sprintf("shm://sock-%d-%d?ring=1048576", os.Getpid(), devSeq.Add(1))
	case "tcp":
		uri = "tcp://" + net.JoinHostPort(host, "0")
	default:
		return nil, fmt.Errorf("sock: transport %q: %w", transport, ErrInvalidConfig)
	}
	dev, err := verbs.Open(uri)
	if err != nil {
		return nil, fmt.Errorf("sock: %w", err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("sock: %w", err)
	}
	return &endpoint{
		cfg: cfg, log: cfg.Logger.With("sock", transport, "device", dev.Address()),
		app: cfg.App, dev: dev, pd: pd,
		links: map[*link]struct{}{},
	}, nil
}

// closeDevice frees the device once every link has released what it made
// on it; it runs once.
func (ep *endpoint) closeDevice() {
	ep.closeOnce.Do(func() {
		ep.released.Wait()
		ep.pd.Dealloc()
		ep.dev.Close()
	})
}

// forget removes a failed link; a closing listener's endpoint closes with
// its last one.
func (ep *endpoint) forget(l *link) {
	ep.mu.Lock()
	delete(ep.links, l)
	last := ep.closing && len(ep.links) == 0
	ep.mu.Unlock()
	if last {
		go ep.closeDevice()
	}
}

func (ep *endpoint) localAddr(l *link) Addr {
	if ep.ln != nil {
		return ep.ln.addr
	}
	return Addr{Transport: ep.dev.Attr().Transport, Host: l.ctl.LocalAddr().String()}
}

func (ep *endpoint) remoteAddr(l *link) Addr {
	if ep.ln != nil {
		if l.peer.transport == "shm" {
			// A dialer's Unix socket has no name: name its device.
			return Addr{Transport: "shm", Host: strings.TrimPrefix(l.peer.device, "shm://")}
		}
		return Addr{Transport: ep.dev.Attr().Transport, Host: l.ctl.RemoteAddr().String()}
	}
	return l.remote
}

// handshake runs link set-up on a fresh control stream: the dialer sends
// HELLO and reads WELCOME, the listener the reverse.
func (ep *endpoint) handshake(ctx context.Context, ctl net.Conn, dialer bool) (*link, error) {
	if dl, ok := ctx.Deadline(); ok {
		ctl.SetDeadline(dl)
	} else {
		ctl.SetDeadline(time.Now().Add(10 * time.Second))
	}
	stop := context.AfterFunc(ctx, func() { ctl.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, maxCtlMsg)
	parts := ep.cfg.Partitions
	if dialer {
		body, err := readMsg(ctl, buf)
		if err != nil {
			return nil, fmt.Errorf("sock: handshake: %w", err)
		}
		if len(body) != 2 || body[0] != msgPreface || body[1] < 1 || body[1] > MaxPartitions {
			return nil, fmt.Errorf("%w: expected PREFACE", ErrProtocol)
		}
		parts = int(body[1])
	} else if err := writeMsg(ctl, []byte{msgPreface, uint8(parts)}); err != nil {
		return nil, fmt.Errorf("sock: preface: %w", err)
	}
	l, err := newLink(ep, ctl, dialer, parts)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*link, error) {
		l.release()
		return nil, err
	}
	if dialer {
		if err := writeMsg(ctl, encodeParams(msgHello, l.local)); err != nil {
			return fail(fmt.Errorf("sock: hello: %w", err))
		}
	}
	body, err := readMsg(ctl, buf)
	if err != nil {
		return fail(fmt.Errorf("sock: handshake: %w", err))
	}
	want := uint8(msgHello)
	if dialer {
		want = msgWelcome
	}
	if body[0] != want {
		return fail(fmt.Errorf("%w: handshake message type %d", ErrProtocol, body[0]))
	}
	peer, err := decodeParams(body[1:])
	if err != nil {
		return fail(err)
	}
	if err := l.connect(peer); err != nil {
		return fail(err)
	}
	if !dialer {
		// Nothing may be written to the dialer before its QPs are
		// connected: wait for READY.
		if err := writeMsg(ctl, encodeParams(msgWelcome, l.local)); err != nil {
			return fail(fmt.Errorf("sock: welcome: %w", err))
		}
		body, err := readMsg(ctl, buf)
		if err != nil {
			return fail(fmt.Errorf("sock: handshake: %w", err))
		}
		if len(body) != 1 || body[0] != msgReady {
			return fail(fmt.Errorf("%w: expected READY", ErrProtocol))
		}
	} else if err := writeMsg(ctl, []byte{msgReady}); err != nil {
		return fail(fmt.Errorf("sock: ready: %w", err))
	}
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	ctl.SetDeadline(time.Time{})
	ep.mu.Lock()
	if ep.closing {
		ep.mu.Unlock()
		return fail(fmt.Errorf("sock: endpoint closing: %w", ErrRefused))
	}
	ep.links[l] = struct{}{}
	ep.released.Add(1)
	l.registered = true
	ep.mu.Unlock()
	l.start()
	return l, nil
}

// acceptSyn answers a SYN: a connection in the accept queue and SYNACK, or
// REJECT.
func (ep *endpoint) acceptSyn(l *link, m *synMsg) {
	reject := func(code uint8, reason string) {
		if err := l.sendCtl(encodeReject(&rejectMsg{dialer: m.dialer, code: code, reason: reason})); err != nil {
			l.fail(fmt.Errorf("sock: control stream: %w", err))
		}
	}
	ln := ep.ln
	if ln == nil || ln.isClosed() {
		reject(rejClosing, "listener closed")
		return
	}
	part := -1
	if cp := ep.cfg.Control; cp != nil {
		ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
		p, err := cp.Admit(ctx, ln.addr, l.peer.app, len(l.parts))
		cancel()
		if err != nil {
			reject(rejPolicy, err.Error())
			return
		}
		if p >= len(l.parts) {
			p = -1
		}
		part = p
	}
	release := func() {
		if cp := ep.cfg.Control; cp != nil {
			cp.Release(ln.addr, l.peer.app, part)
		}
	}
	id, ok := l.allocSlot()
	if !ok {
		release()
		reject(rejSlots, "no connection slot")
		return
	}
	if part < 0 {
		part = l.pickPartition()
	}
	c := newConn(l, id, ep.cfg.ReadBuffer)
	c.established(m.dialer, part, m.rcvbuf)
	if ep.cfg.Control != nil {
		c.onFree = release
	}
	l.register(id, c)
	select {
	case ln.accepts <- c:
	default:
		l.freeSlot(id)
		reject(rejBacklog, "accept queue full")
		return
	}
	if err := l.sendCtl(encodeSynAck(&synAckMsg{dialer: m.dialer, acceptor: id, rcvbuf: uint32(ep.cfg.ReadBuffer), part: uint8(c.part.idx)})); err != nil {
		l.fail(fmt.Errorf("sock: control stream: %w", err))
	}
}
