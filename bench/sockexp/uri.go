package sockexp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
)

// A URI names where a server listens and what its clients dial:
//
//	net+tcp://HOST:PORT   Go's net package over TCP (a baseline)
//	net+unix:///PATH      Go's net package over a Unix domain socket
//	net+unix://@NAME      the same in Linux's abstract namespace
//	tcp://HOST:PORT       rdmakit's sock over the tcp verbs transport
//	shm://NAME            rdmakit's sock over shared memory
//
// The net schemes are built in; the sock schemes are registered by
// sock.go (registerScheme), so that this file does not depend on them.

// ErrScheme is returned for a URI whose scheme no network serves.
var ErrScheme = errors.New("sockexp: unknown URI scheme")

// ErrURI is returned for a URI that cannot be parsed.
var ErrURI = errors.New("sockexp: malformed URI")

// scheme is how one URI scheme listens and dials. The address passed is
// the URI without "SCHEME://".
type scheme struct {
	// Listen starts listening at addr.
	Listen func(ctx context.Context, addr string) (net.Listener, error)
	// Dial connects to addr.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Addr turns a listener's address back into addr, for the URI a
	// server announces (port 0 becomes the port it got).
	Addr func(net.Listener) string
}

var (
	schemesMu sync.RWMutex
	schemes   = map[string]scheme{
		"net+tcp":  netScheme("tcp"),
		"net+unix": netScheme("unix"),
	}
)

// registerScheme makes name:// URIs listen and dial through s. It
// panics on a duplicate name or a scheme without Listen, Dial or Addr,
// which are programming errors.
func registerScheme(name string, s scheme) {
	if name == "" || s.Listen == nil || s.Dial == nil || s.Addr == nil {
		panic(fmt.Sprintf("sockexp: invalid scheme %q", name))
	}
	schemesMu.Lock()
	defer schemesMu.Unlock()
	if _, dup := schemes[name]; dup {
		panic(fmt.Sprintf("sockexp: scheme %q registered twice", name))
	}
	schemes[name] = s
}

// netScheme is Go's net package over network ("tcp" or "unix").
func netScheme(network string) scheme {
	return scheme{
		Listen: func(ctx context.Context, addr string) (net.Listener, error) {
			var lc net.ListenConfig
			return lc.Listen(ctx, network, addr)
		},
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		Addr: func(ln net.Listener) string { return ln.Addr().String() },
	}
}

// parse splits uri into its scheme and address.
func parse(uri string) (scheme, string, string, error) {
	name, addr, ok := strings.Cut(uri, "://")
	if !ok || name == "" || addr == "" {
		return scheme{}, "", "", fmt.Errorf("%w: %q (want SCHEME://ADDRESS)", ErrURI, uri)
	}
	schemesMu.RLock()
	s, ok := schemes[name]
	schemesMu.RUnlock()
	if !ok {
		return scheme{}, "", "", fmt.Errorf("%w %q in %q (known: %s)", ErrScheme, name, uri, strings.Join(Schemes(), ", "))
	}
	return s, name, addr, nil
}

// Schemes returns the URI schemes that can be listened on and dialled,
// sorted.
func Schemes() []string {
	schemesMu.RLock()
	defer schemesMu.RUnlock()
	out := make([]string, 0, len(schemes))
	for n := range schemes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Listen listens at uri. The listener's announced URI is ListenerURI.
func Listen(ctx context.Context, uri string) (net.Listener, error) {
	s, name, addr, err := parse(uri)
	if err != nil {
		return nil, err
	}
	ln, err := s.Listen(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("sockexp: listen %s: %w", uri, err)
	}
	return &uriListener{Listener: ln, uri: name + "://" + s.Addr(ln)}, nil
}

// Dial connects to uri.
func Dial(ctx context.Context, uri string) (net.Conn, error) {
	s, _, addr, err := parse(uri)
	if err != nil {
		return nil, err
	}
	c, err := s.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("sockexp: dial %s: %w", uri, err)
	}
	return c, nil
}

// uriListener is a listener that knows the URI its clients dial.
type uriListener struct {
	net.Listener
	uri string
}

// ListenerURI returns the URI that reaches a listener returned by
// Listen (with the port it got for port 0), or "" for another listener.
func ListenerURI(ln net.Listener) string {
	if u, ok := ln.(*uriListener); ok {
		return u.uri
	}
	return ""
}
