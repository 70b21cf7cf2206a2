package sock

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
)

// Listener accepts connections over remote-memory rings. It implements
// net.Listener.
type Listener struct {
	ep      *endpoint
	ctl     net.Listener
	addr    Addr
	accepts chan *Conn
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup

	unregister func() // the control plane's
}

// Listen listens at uri with the default Config: "shm://NAME" for processes
// on this host (they find the listener by NAME), "tcp://HOST:PORT" for other
// hosts (port 0 picks a free one; Addr tells which).
func Listen(ctx context.Context, uri string) (*Listener, error) {
	var c Config
	return c.Listen(ctx, uri)
}

// Listen listens at uri with c.
func (c Config) Listen(ctx context.Context, uri string) (*Listener, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	a, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	network, address := a.controlAddr()
	var lc net.ListenConfig
	ctl, err := lc.Listen(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("sock: listen %s: %w", uri, err)
	}
	if a.Transport == "tcp" {
		a.Host = ctl.Addr().String()
	}
	ep, err := openEndpoint(cfg, a.Transport, hostOf(a.Host))
	if err != nil {
		ctl.Close()
		return nil, err
	}
	ln := &Listener{ep: ep, ctl: ctl, addr: a, accepts: make(chan *Conn, cfg.Backlog), done: make(chan struct{})}
	ep.ln = ln
	ep.addr = a
	ep.log = ep.log.With("listen", a.String())
	if cp := cfg.Control; cp != nil {
		unreg, err := cp.Register(ctx, ListenerInfo{
			Addr: a, App: cfg.App, PID: os.Getpid(),
			Partitions: cfg.Partitions, RingSize: ep.cfg.RingSize, MTU: cfg.MTU,
		})
		if err != nil {
			ctl.Close()
			ep.closeDevice()
			return nil, fmt.Errorf("sock: register with the control plane: %w", err)
		}
		ln.unregister = unreg
	}
	ln.wg.Add(1)
	go ln.serve()
	return ln, nil
}

func (ln *Listener) serve() {
	defer ln.wg.Done()
	for {
		c, err := ln.ctl.Accept()
		if err != nil {
			if !ln.isClosed() {
				ln.ep.log.Warn("sock: accept", "err", err)
			}
			return
		}
		ln.wg.Add(1)
		go func() {
			defer ln.wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				select {
				case <-ln.done:
					cancel()
				case <-ctx.Done():
				}
			}()
			if _, err := ln.ep.handshake(ctx, c, false); err != nil {
				ln.ep.log.Debug("sock: link handshake failed", "err", err)
				c.Close()
			}
		}()
	}
}

func (ln *Listener) isClosed() bool { return isClosed(ln.done) }

// Accept waits for the next connection.
func (ln *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-ln.accepts:
		return c, nil
	case <-ln.done:
		return nil, &net.OpError{Op: "accept", Net: ln.addr.Network(), Addr: ln.addr, Err: net.ErrClosed}
	}
}

// Close stops accepting. Connections already accepted go on; connections
// not yet accepted are reset.
func (ln *Listener) Close() error {
	first := false
	ln.once.Do(func() {
		first = true
		close(ln.done)
	})
	if !first {
		return &net.OpError{Op: "close", Net: ln.addr.Network(), Addr: ln.addr, Err: net.ErrClosed}
	}
	if ln.unregister != nil {
		ln.unregister()
	}
	err := ln.ctl.Close()
	ln.wg.Wait()
	for {
		select {
		case c := <-ln.accepts:
			c.Close()
			continue
		default:
		}
		break
	}
	ep := ln.ep
	ep.mu.Lock()
	ep.closing = true
	ep.closed.Store(true)
	var idle []*link
	for l := range ep.links {
		l.mu.Lock()
		if l.nconns == 0 {
			idle = append(idle, l)
		}
		l.mu.Unlock()
	}
	none := len(ep.links) == 0
	ep.mu.Unlock()
	for _, l := range idle {
		l.fail(errLinkClosed)
	}
	if none {
		ep.closeDevice()
	}
	return err
}

// Addr returns the listener's address (with the real port when 0 was asked
// for).
func (ln *Listener) Addr() net.Addr { return ln.addr }
