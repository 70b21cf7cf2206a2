package sockd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/sock"
)

var seq atomic.Int64

// startServer runs a daemon on a fresh abstract socket and a free TCP port
// and returns it with a Client of it.
func startServer(t *testing.T, p *Policy) (*Server, *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name := fmt.Sprintf("@rdmakit-sockd-test-%d-%d", os.Getpid(), seq.Add(1))
	s, err := Start(ctx, Config{Unix: name, Listen: "127.0.0.1:0", Policy: p, PIDCheck: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// A generous ResolveTimeout: a loaded machine must not turn a Resolve
	// the test expects to succeed into a fallback.
	return s, &Client{Unix: name, Port: s.TCPAddr().(*net.TCPAddr).Port, ResolveTimeout: 5 * time.Second}
}

func shmURI() string { return fmt.Sprintf("shm://sockd-t%d-%d", os.Getpid(), seq.Add(1)) }

// echoListener listens at uri with the control plane cp and echoes every
// connection until its peer closes; accepted receives each accepted
// connection.
func echoListener(t *testing.T, cfg sock.Config, uri string) (*sock.Listener, <-chan *sock.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := cfg.Listen(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan *sock.Conn, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*sock.Conn)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln, accepted
}

// roundTrip checks that c echoes.
func roundTrip(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

func dial(t *testing.T, d *sock.Dialer, uri string) (*sock.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, uri)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func listenerStatus(s *Server, uri string) (ListenerStatus, bool) {
	for _, l := range s.Status().Listeners {
		if l.URI == uri {
			return l, true
		}
	}
	return ListenerStatus{}, false
}

func appConns(s *Server, app string) int {
	for _, a := range s.Status().Apps {
		if a.App == app {
			return a.Conns
		}
	}
	return 0
}

func TestAllowListRefuses(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"rules": [{"app": "intruder", "to": "shm://*", "action": "deny"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, cp := startServer(t, p)
	uri := shmURI()
	echoListener(t, sock.Config{App: "db", Control: cp}, uri)
	if _, ok := listenerStatus(s, uri); !ok {
		t.Fatalf("listener not registered: %+v", s.Status())
	}
	_, err = dial(t, &sock.Dialer{Config: sock.Config{App: "intruder"}}, uri)
	if !errors.Is(err, sock.ErrRefused) || !strings.Contains(err.Error(), "allow-list") {
		t.Fatalf("intruder's dial: %v, want ErrRefused from the allow-list", err)
	}
	c, err := dial(t, &sock.Dialer{Config: sock.Config{App: "web"}}, uri)
	if err != nil {
		t.Fatalf("web's dial: %v", err)
	}
	roundTrip(t, c)
	if l, _ := listenerStatus(s, uri); l.Refused != 1 || l.ByApp["web"] != 1 || l.ByApp["intruder"] != 0 {
		t.Fatalf("status %+v", l)
	}
}

// TestConnQuota: "web" may hold three connections; the fourth is refused
// until one closes.
func TestConnQuota(t *testing.T) {
	p := &Policy{Quotas: map[string]Quota{"web": {MaxConns: 3}}}
	s, cp := startServer(t, p)
	uri := shmURI()
	echoListener(t, sock.Config{App: "db", Control: cp}, uri)
	d := &sock.Dialer{Config: sock.Config{App: "web"}}
	var conns []*sock.Conn
	for range 3 {
		c, err := dial(t, d, uri)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c)
		conns = append(conns, c)
	}
	_, err := dial(t, d, uri)
	if !errors.Is(err, sock.ErrRefused) || !strings.Contains(err.Error(), "max_conns") {
		t.Fatalf("fourth connection: %v, want ErrRefused by max_conns", err)
	}
	// Another application is not affected by web's quota.
	if _, err := dial(t, &sock.Dialer{Config: sock.Config{App: "api"}}, uri); err != nil {
		t.Fatalf("api: %v", err)
	}
	conns[0].Close()
	waitFor(t, "the closed connection's release", func() bool { return appConns(s, "web") == 2 })
	c, err := dial(t, d, uri)
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	roundTrip(t, c)
}

// Negative control of TestConnQuota: without the quota the fourth
// connection is accepted.
func TestConnQuotaNegativeControl(t *testing.T) {
	_, cp := startServer(t, nil)
	uri := shmURI()
	echoListener(t, sock.Config{App: "db", Control: cp}, uri)
	d := &sock.Dialer{Config: sock.Config{App: "web"}}
	for i := range 4 {
		c, err := dial(t, d, uri)
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		roundTrip(t, c)
	}
}

// TestPartitionsLeastLoaded: the daemon, not the library's round-robin,
// places connections — into the partitions with the fewest.
func TestPartitionsLeastLoaded(t *testing.T) {
	s, cp := startServer(t, nil)
	uri := shmURI()
	_, accepted := echoListener(t, sock.Config{App: "db", Control: cp, Partitions: 4, RingSize: 256 << 10, MTU: 16 << 10}, uri)
	// A link's two sides have the same number of partitions.
	d := &sock.Dialer{Config: sock.Config{App: "web", Partitions: 4, RingSize: 256 << 10}}
	var conns []*sock.Conn
	for i := range 4 {
		c, err := dial(t, d, uri)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c)
		a := <-accepted
		if c.Partition() != i || a.Partition() != i {
			t.Fatalf("connection %d in partition %d (accepted end %d), want %d", i, c.Partition(), a.Partition(), i)
		}
		conns = append(conns, c)
	}
	conns[1].Close()
	conns[2].Close()
	waitFor(t, "partitions 1 and 2 emptied", func() bool {
		l, _ := listenerStatus(s, uri)
		return slices.Equal(l.Conns, []int{1, 0, 0, 1})
	})
	// Round-robin would say 0 and 1; the least loaded are 1 and 2.
	var got []int
	for range 2 {
		c, err := dial(t, d, uri)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c)
		got = append(got, c.Partition())
		if a := <-accepted; a.Partition() != c.Partition() {
			t.Fatalf("accepted end in partition %d, dialed end in %d", a.Partition(), c.Partition())
		}
	}
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("new connections in partitions %v, want [1 2]", got)
	}
	if l, _ := listenerStatus(s, uri); !slices.Equal(l.Conns, []int{1, 1, 1, 1}) {
		t.Fatalf("status %+v", l)
	}
}

// plainServer is an ordinary TCP echo server that counts its connections.
func plainServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), &n
}

func TestResolveFallsBackToTCP(t *testing.T) {
	s, cp := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// A plain server: the daemon of its host has no listener there.
	addr, accepts := plainServer(t)
	d := &sock.Dialer{Config: sock.Config{App: "web", Control: cp}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*net.TCPConn); !ok {
		t.Fatalf("dialed a %T, want a plain *net.TCPConn", c)
	}
	roundTrip(t, c)
	if n := accepts.Load(); n != 1 {
		t.Fatalf("the plain server saw %d connections, want 1: Resolve must not touch it", n)
	}

	// A sock listener registered with the daemon at a tcp address.
	ln, _ := echoListener(t, sock.Config{App: "db", Control: cp}, "tcp://127.0.0.1:0")
	sockAddr := ln.Addr().(sock.Addr).Host
	if _, ok := listenerStatus(s, "tcp://"+sockAddr); !ok {
		t.Fatalf("listener not registered: %+v", s.Status())
	}
	c2, err := d.DialContext(ctx, "tcp", sockAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok := c2.(*sock.Conn); !ok || c2.LocalAddr().Network() != "sock+tcp" {
		t.Fatalf("dialed a %T on %s, want a *sock.Conn on sock+tcp", c2, c2.LocalAddr().Network())
	}
	roundTrip(t, c2)
}

func TestResolveWithoutDaemon(t *testing.T) {
	// A port with nothing on it: the dialer's host "has no sockd".
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	addr, accepts := plainServer(t)
	cp := &Client{Unix: "@rdmakit-sockd-none", Port: port}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, ok, err := cp.Resolve(ctx, "tcp", addr); ok || err != nil {
		t.Fatalf("Resolve without a daemon: ok %v, err %v", ok, err)
	}
	d := &sock.Dialer{Config: sock.Config{Control: cp}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c)
	if _, ok := c.(*net.TCPConn); !ok || accepts.Load() != 1 {
		t.Fatalf("dialed a %T, plain server saw %d connections; want TCP and 1", c, accepts.Load())
	}
}

func TestResolveCache(t *testing.T) {
	s, cp := startServer(t, nil)
	cp.CacheTTL = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, _ := echoListener(t, sock.Config{App: "db", Control: cp}, "tcp://127.0.0.1:0")
	addr := ln.Addr().(sock.Addr).Host
	if _, ok, err := cp.Resolve(ctx, "tcp", addr); !ok || err != nil {
		t.Fatalf("Resolve: %v, %v", ok, err)
	}
	s.Close() // the answer now comes from the cache alone
	if uri, ok, err := cp.Resolve(ctx, "tcp", addr); !ok || err != nil || uri != "tcp://"+addr {
		t.Fatalf("cached Resolve: %q, %v, %v", uri, ok, err)
	}
	uncached := &Client{Unix: cp.Unix, Port: cp.Port, CacheTTL: -1}
	if _, ok, _ := uncached.Resolve(ctx, "tcp", addr); ok {
		t.Fatal("Resolve without cache and without daemon says ok")
	}
}

// TestListenQuota: a registration over the application's max_listeners or
// max_window_bytes fails the Listen itself.
func TestListenQuota(t *testing.T) {
	_, cp := startServer(t, &Policy{Quotas: map[string]Quota{
		"db":  {MaxListeners: 1},
		"big": {MaxWindowBytes: 1 << 20},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	echoListener(t, sock.Config{App: "db", Control: cp}, shmURI())
	if ln, err := (sock.Config{App: "db", Control: cp}).Listen(ctx, shmURI()); !errors.Is(err, ErrQuota) {
		if err == nil {
			ln.Close()
		}
		t.Fatalf("second listener of db: %v, want ErrQuota", err)
	}
	// 2 partitions × 1 MiB is over big's 1 MiB; 2 × 256 KiB is not.
	if ln, err := (sock.Config{App: "big", Control: cp, RingSize: 1 << 20}).Listen(ctx, shmURI()); !errors.Is(err, ErrQuota) {
		if err == nil {
			ln.Close()
		}
		t.Fatalf("listener over max_window_bytes: %v, want ErrQuota", err)
	}
	echoListener(t, sock.Config{App: "big", Control: cp, RingSize: 256 << 10}, shmURI())
}
