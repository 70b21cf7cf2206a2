package sock

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// Dialer dials sock connections. Its endpoints (one verbs device per
// transport and local host) and links (one per peer endpoint) are shared by
// every connection it dials. The zero value is ready to use.
type Dialer struct {
	// Config configures this side of the links the Dialer makes.
	Config Config

	mu  sync.Mutex
	eps map[string]*endpoint
	cfg *Config
}

var defaultDialer Dialer

// Dial connects to the listener at uri ("shm://NAME" or "tcp://HOST:PORT")
// through the package's default Dialer.
func Dial(ctx context.Context, uri string) (*Conn, error) { return defaultDialer.Dial(ctx, uri) }

// Dial connects to the listener at uri.
func (d *Dialer) Dial(ctx context.Context, uri string) (*Conn, error) {
	a, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	l, err := d.link(ctx, a)
	if err != nil {
		return nil, err
	}
	c, err := l.dial(ctx, a.service(), d.cfg.ReadBuffer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// link returns the link to the endpoint at a, making it if needed.
func (d *Dialer) link(ctx context.Context, a Addr) (*link, error) {
	network, address := a.controlAddr()
	d.mu.Lock()
	if d.cfg == nil {
		cfg, err := d.Config.withDefaults()
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		d.cfg = &cfg
		d.eps = map[string]*endpoint{}
	}
	d.mu.Unlock()
	for {
		d.mu.Lock()
		// Over tcp the device listens on the host the peer sees us as;
		// one endpoint per transport and local host.
		var ep *endpoint
		for _, e := range d.eps {
			e.mu.Lock()
			l := e.byPeer[address]
			e.mu.Unlock()
			if l != nil && l.alive() {
				d.mu.Unlock()
				return l, nil
			}
			_ = ep
		}
		d.mu.Unlock()
		ctl, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil {
			return nil, fmt.Errorf("sock: dial %s: %w: %w", a, ErrNoEndpoint, err)
		}
		key := a.Transport
		if a.Transport == "tcp" {
			key += "/" + hostOf(ctl.LocalAddr().String())
		}
		d.mu.Lock()
		ep = d.eps[key]
		if ep == nil {
			ep, err = openEndpoint(*d.cfg, a.Transport, hostOf(ctl.LocalAddr().String()))
			if err != nil {
				d.mu.Unlock()
				ctl.Close()
				return nil, err
			}
			d.eps[key] = ep
		}
		d.mu.Unlock()
		l, err := ep.handshake(ctx, ctl, true)
		if err != nil {
			ctl.Close()
			return nil, fmt.Errorf("sock: dial %s: %w", a, err)
		}
		l.remote = a
		ep.mu.Lock()
		if old := ep.byPeer[address]; old != nil && old.alive() {
			ep.mu.Unlock()
			l.fail(errLinkClosed) // another Dial made one first
			return old, nil
		}
		ep.byPeer[address] = l
		ep.mu.Unlock()
		return l, nil
	}
}

// DialContext dials like net.Dialer.DialContext, for http.Transport and
// grpc.WithContextDialer: network "sock+shm" (or "shm") with address NAME,
// "sock+tcp" with HOST:PORT. Any other network is a plain one: with a
// control plane (Config.Control) the Dialer asks it whether the address is
// served by an rdmakit endpoint and dials that; otherwise, or when it is
// not, it falls back to a plain net.Dialer — so a client dials rdmakit
// servers and ordinary ones alike.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "shm", "sock+shm":
		return d.Dial(ctx, "shm://"+address)
	case "sock+tcp":
		return d.Dial(ctx, "tcp://"+address)
	}
	if cp := d.Config.Control; cp != nil {
		uri, ok, err := cp.Resolve(ctx, network, address)
		if err == nil && ok {
			return d.Dial(ctx, uri)
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}
