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

	mu      sync.Mutex
	cfg     *Config
	eps     map[string]*endpoint // by transport (and local host for tcp)
	links   map[string]*link     // by the peer's control address
	pending map[string]*linkDial // link set-ups in progress
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
	c, err := l.dial(ctx, a.service(), l.ep.cfg.ReadBuffer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// link returns the link to the endpoint at a, making it if needed; dials
// that race for the same peer share one link set-up.
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
		d.links = map[string]*link{}
		d.pending = map[string]*linkDial{}
	}
	for {
		if l := d.links[address]; l != nil && l.alive() {
			d.mu.Unlock()
			return l, nil
		}
		pd := d.pending[address]
		if pd == nil {
			break
		}
		d.mu.Unlock()
		select {
		case <-pd.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if pd.err != nil {
			return nil, pd.err
		}
		d.mu.Lock()
	}
	pd := &linkDial{done: make(chan struct{})}
	d.pending[address] = pd
	d.mu.Unlock()
	l, err := d.newLink(ctx, a, network, address)
	d.mu.Lock()
	delete(d.pending, address)
	if err == nil {
		d.links[address] = l
	}
	d.mu.Unlock()
	pd.l, pd.err = l, err
	close(pd.done)
	return l, err
}

// newLink dials the control stream and sets up a link over it.
func (d *Dialer) newLink(ctx context.Context, a Addr, network, address string) (*link, error) {
	ctl, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("sock: dial %s: %w: %w", a, ErrNoEndpoint, err)
	}
	// Over tcp the device listens on the host the peer sees us as: one
	// endpoint per transport and local host.
	host := hostOf(ctl.LocalAddr().String())
	key := a.Transport
	if a.Transport == "tcp" {
		key += "/" + host
	}
	d.mu.Lock()
	ep := d.eps[key]
	if ep == nil {
		ep, err = openEndpoint(*d.cfg, a.Transport, host)
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
	return l, nil
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

// Close ends the Dialer's links — every connection it dialed is reset —
// and frees its devices. Dial after Close makes new ones.
func (d *Dialer) Close() error {
	d.mu.Lock()
	links := d.links
	eps := d.eps
	d.links = map[string]*link{}
	d.eps = map[string]*endpoint{}
	d.mu.Unlock()
	for _, ep := range eps {
		ep.mu.Lock()
		ep.closing = true
		ep.closed.Store(true)
		none := len(ep.links) == 0
		ep.mu.Unlock()
		if none {
			ep.closeDevice()
		}
	}
	for _, l := range links {
		l.fail(errLinkClosed)
	}
	return nil
}
