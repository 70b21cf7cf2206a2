package sock

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Addr is a sock address: Network is "sock+shm" or "sock+tcp", String the
// URI ("shm://NAME", "tcp://HOST:PORT").
type Addr struct {
	Transport string // "shm" or "tcp"
	Host      string // NAME or HOST:PORT
}

// Network returns "sock+shm" or "sock+tcp".
func (a Addr) Network() string { return "sock+" + a.Transport }

// String returns the address as a URI.
func (a Addr) String() string { return a.Transport + "://" + a.Host }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$`)

// parseURI splits "shm://NAME" or "tcp://HOST:PORT".
func parseURI(uri string) (Addr, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Addr{}, fmt.Errorf("sock: %q: %w: %v", uri, ErrInvalidConfig, err)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return Addr{}, fmt.Errorf("sock: %q: want shm://NAME or tcp://HOST:PORT: %w", uri, ErrInvalidConfig)
	}
	switch u.Scheme {
	case "shm":
		if !nameRE.MatchString(u.Host) {
			return Addr{}, fmt.Errorf("sock: %q: a name of letters, digits, . _ - (at most 48): %w", uri, ErrInvalidConfig)
		}
	case "tcp":
		if _, _, err := net.SplitHostPort(u.Host); err != nil {
			return Addr{}, fmt.Errorf("sock: %q: %w: %v", uri, ErrInvalidConfig, err)
		}
	default:
		return Addr{}, fmt.Errorf("sock: %q: scheme %q (shm or tcp): %w", uri, u.Scheme, ErrInvalidConfig)
	}
	return Addr{Transport: u.Scheme, Host: u.Host}, nil
}

// controlAddr is the network and address of an endpoint's control stream.
func (a Addr) controlAddr() (network, address string) {
	if a.Transport == "shm" {
		return "unix", "@rdmakit-sock/" + a.Host
	}
	return "tcp", a.Host
}

// service is what a dialer names in SYN: the listener's name or port.
func (a Addr) service() string {
	if a.Transport == "shm" {
		return a.Host
	}
	_, port, _ := net.SplitHostPort(a.Host)
	return port
}

func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return strings.Trim(h, "[]")
}
