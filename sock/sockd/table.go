package sockd

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmakit/rdmakit/sock"
)

// Bounds on what clients can make the daemon hold.
const (
	// MaxListeners is the number of listeners registered at once.
	MaxListeners = 4096
	// MaxApps is the number of applications holding connections at once.
	MaxApps = 4096
	// maxCount bounds one RELEASE's count.
	maxCount = sock.MaxConns
)

// table is the daemon's state with no I/O: registered listeners, the
// connections admitted to them, and the policy. Each listener belongs to
// one session (a client connection); ending the session unregisters it and
// releases every connection it admitted. The Server serialises calls.
type table struct {
	policy    *Policy
	listeners map[uint64]*listener // by session
	byURI     map[string]*listener
	apps      map[string]*appUsage
}

// listener is a registered listener and its admitted connections.
type listener struct {
	session  uint64
	info     sock.ListenerInfo
	uri      string
	parts    []int          // admitted connections per partition
	byApp    map[string]int // admitted connections per dialing application
	admitted uint64         // ever
	refused  uint64         // ever
}

// appUsage is what one application holds.
type appUsage struct {
	conns     int   // as the dialer: admitted, not yet released
	listeners int   // registered
	window    int64 // bytes of its listeners' windows
	refused   uint64
}

func newTable(p *Policy) *table {
	if p == nil {
		p = &Policy{}
	}
	return &table{policy: p, listeners: map[uint64]*listener{}, byURI: map[string]*listener{}, apps: map[string]*appUsage{}}
}

// app returns app's usage, making it if the table has room.
func (t *table) app(name string) (*appUsage, error) {
	if u := t.apps[name]; u != nil {
		return u, nil
	}
	if len(t.apps) >= MaxApps {
		return nil, fmt.Errorf("%w: %d applications", ErrFull, MaxApps)
	}
	u := &appUsage{}
	t.apps[name] = u
	return u, nil
}

// forgetIdle drops an application that holds nothing.
func (t *table) forgetIdle(name string) {
	if u := t.apps[name]; u != nil && u.conns == 0 && u.listeners == 0 {
		delete(t.apps, name)
	}
}

// register records session's listener.
func (t *table) register(session uint64, info sock.ListenerInfo) error {
	uri := info.Addr.String()
	switch {
	case t.listeners[session] != nil:
		return fmt.Errorf("%w: one listener per connection", ErrProtocol)
	case info.Partitions < 1 || info.Partitions > sock.MaxPartitions || info.RingSize < 1 || info.MTU < 1:
		return fmt.Errorf("%w: listener %s: %d partitions, ring %d, MTU %d", ErrProtocol, uri, info.Partitions, info.RingSize, info.MTU)
	case t.byURI[uri] != nil:
		return fmt.Errorf("%w: %s (pid %d)", ErrConflict, uri, t.byURI[uri].info.PID)
	case len(t.listeners) >= MaxListeners:
		return fmt.Errorf("%w: %d listeners", ErrFull, MaxListeners)
	}
	u, err := t.app(info.App)
	if err != nil {
		return err
	}
	q := t.policy.QuotaOf(info.App)
	window := int64(info.Partitions) * int64(info.RingSize)
	if q.MaxListeners > 0 && u.listeners+1 > q.MaxListeners {
		t.forgetIdle(info.App)
		return fmt.Errorf("%w: app %q has %d listeners (max_listeners %d)", ErrQuota, info.App, u.listeners, q.MaxListeners)
	}
	if q.MaxWindowBytes > 0 && u.window+window > q.MaxWindowBytes {
		t.forgetIdle(info.App)
		return fmt.Errorf("%w: app %q: window of %d bytes more than its %d (max_window_bytes %d)", ErrQuota, info.App, window, u.window, q.MaxWindowBytes)
	}
	u.listeners++
	u.window += window
	l := &listener{session: session, info: info, uri: uri, parts: make([]int, info.Partitions), byApp: map[string]int{}}
	t.listeners[session] = l
	t.byURI[uri] = l
	return nil
}

// unregister drops session's listener and releases its connections.
func (t *table) unregister(session uint64) {
	l := t.listeners[session]
	if l == nil {
		return
	}
	delete(t.listeners, session)
	delete(t.byURI, l.uri)
	for app, n := range l.byApp {
		if u := t.apps[app]; u != nil {
			u.conns -= n
			t.forgetIdle(app)
		}
	}
	if u := t.apps[l.info.App]; u != nil {
		u.listeners--
		u.window -= int64(l.info.Partitions) * int64(l.info.RingSize)
		t.forgetIdle(l.info.App)
	}
}

// admit decides on a connection from app to session's listener and
// returns its partition: the least loaded of the first partitions.
func (t *table) admit(session uint64, app string, partitions int) (int, error) {
	l := t.listeners[session]
	if l == nil {
		return 0, ErrNotRegistered
	}
	if partitions < 1 || partitions > sock.MaxPartitions {
		return 0, fmt.Errorf("%w: %d partitions", ErrProtocol, partitions)
	}
	if !t.policy.Allows(app, l.uri, l.info.App) {
		l.refused++
		return 0, fmt.Errorf("%w: app %q may not connect to %s", ErrDenied, app, l.uri)
	}
	u, err := t.app(app)
	if err != nil {
		l.refused++
		return 0, err
	}
	if q := t.policy.QuotaOf(app); q.MaxConns > 0 && u.conns >= q.MaxConns {
		l.refused++
		u.refused++
		return 0, fmt.Errorf("%w: app %q holds %d connections (max_conns %d)", ErrQuota, app, u.conns, q.MaxConns)
	}
	for len(l.parts) < partitions {
		l.parts = append(l.parts, 0)
	}
	best := 0
	for p := 1; p < partitions; p++ {
		if l.parts[p] < l.parts[best] {
			best = p
		}
	}
	l.parts[best]++
	l.byApp[app]++
	u.conns++
	l.admitted++
	return best, nil
}

// release ends count connections from app in partition of session's
// listener. Counts never go below zero, whatever a client claims.
func (t *table) release(session uint64, app string, partition, count int) {
	l := t.listeners[session]
	if l == nil {
		return
	}
	n := min(count, l.byApp[app])
	if n <= 0 {
		return
	}
	if l.byApp[app] -= n; l.byApp[app] == 0 {
		delete(l.byApp, app)
	}
	if partition >= 0 && partition < len(l.parts) {
		l.parts[partition] = max(0, l.parts[partition]-n)
	}
	if u := t.apps[app]; u != nil {
		u.conns -= n
		t.forgetIdle(app)
	}
}

// resolve returns the URI of a tcp listener registered at host:port:
// one on that port whose host is unspecified (0.0.0.0, ::) or host itself.
func (t *table) resolve(network, address string) (string, bool) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return "", false
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", false
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", false
	}
	for _, l := range t.listeners {
		if l.info.Addr.Transport != "tcp" {
			continue
		}
		lh, lp, err := net.SplitHostPort(l.info.Addr.Host)
		if err != nil || lp != port {
			continue
		}
		ip := net.ParseIP(strings.Trim(lh, "[]"))
		if lh == "" || (ip != nil && ip.IsUnspecified()) || lh == host || sameLoopback(ip, host) {
			return "tcp://" + address, true
		}
	}
	return "", false
}

// sameLoopback says whether ip and host both name this host's loopback.
func sameLoopback(ip net.IP, host string) bool {
	if ip == nil || !ip.IsLoopback() {
		return false
	}
	if host == "localhost" {
		return true
	}
	h := net.ParseIP(strings.Trim(host, "[]"))
	return h != nil && h.IsLoopback()
}

// status reports the table.
func (t *table) status() Status {
	s := Status{Listeners: []ListenerStatus{}, Apps: []AppStatus{}}
	for _, l := range t.listeners {
		ls := ListenerStatus{
			URI: l.uri, App: l.info.App, PID: l.info.PID,
			Partitions: l.info.Partitions, RingSize: l.info.RingSize, MTU: l.info.MTU,
			Conns: append([]int(nil), l.parts...), ByApp: map[string]int{},
			Admitted: l.admitted, Refused: l.refused,
		}
		for app, n := range l.byApp {
			ls.ByApp[app] = n
		}
		s.Listeners = append(s.Listeners, ls)
	}
	sort.Slice(s.Listeners, func(i, j int) bool { return s.Listeners[i].URI < s.Listeners[j].URI })
	for name, u := range t.apps {
		s.Apps = append(s.Apps, AppStatus{App: name, Conns: u.conns, Listeners: u.listeners, WindowBytes: u.window, Refused: u.refused})
	}
	sort.Slice(s.Apps, func(i, j int) bool { return s.Apps[i].App < s.Apps[j].App })
	return s
}
