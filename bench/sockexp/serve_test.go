package sockexp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveInProcess runs app on a loopback TCP listener in this process
// until the test ends; Serve must then return nil.
func serveInProcess(t *testing.T, app App) net.Listener {
	t.Helper()
	ln := listenTCP(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, app) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve %s: %v", app, err)
		}
	})
	return ln
}

// Serve ends when its context does, closing its listener and the
// connections it serves.
func TestServeEndsConnections(t *testing.T) {
	for _, app := range Apps {
		t.Run(string(app), func(t *testing.T) {
			ln := listenTCP(t)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, ln, app) }()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if app == Echo { // served: the echo comes back
				c.Write([]byte("ping"))
				buf := make([]byte, 4)
				if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
					t.Fatalf("echo %q, %v", buf, err)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Error("the connection is still open")
			}
			if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				t.Error("the listener still accepts")
			}
		})
	}
}

// ServeURI says where it listens, with the port it got, and refuses an
// unknown app before listening.
func TestServeURIAnnounces(t *testing.T) {
	var out lockedBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeURI(ctx, &out, "net+tcp://127.0.0.1:0", Echo) }()
	var uri string
	for deadline := time.Now().Add(10 * time.Second); uri == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := listenLine.FindStringSubmatch(out.String()); m != nil {
			uri = m[1]
		}
	}
	if !regexp.MustCompile(`^net\+tcp://127\.0\.0\.1:[1-9][0-9]*$`).MatchString(uri) {
		t.Fatalf("announced %q", out.String())
	}
	c, err := Dial(t.Context(), uri)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := ServeURI(t.Context(), io.Discard, "net+tcp://127.0.0.1:0", "gopher"); !errors.Is(err, ErrApp) {
		t.Errorf("app gopher: %v, want ErrApp", err)
	}
}

// URIs: the net schemes listen and dial over TCP, a Unix socket path
// and an abstract Unix name; a listener's URI names its real address;
// unknown schemes and malformed URIs get typed errors.
func TestURIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	for _, uri := range []string{"net+tcp://127.0.0.1:0", "net+unix://" + path, "net+unix://@" + uniqueName("test"),
		"shm://" + uniqueName("test") + "?mode=spsc&partitions=1", "tcp://127.0.0.1:0?batch=2&spin=10us"} {
		ln, err := Listen(t.Context(), uri)
		if err != nil {
			t.Fatal(err)
		}
		got := ListenerURI(ln)
		_, query, _ := strings.Cut(uri, "?")
		if strings.Contains(uri, ":0") == (got == uri) || !strings.HasPrefix(got, uri[:8]) || !strings.HasSuffix(got, query) {
			t.Errorf("%s: listener URI %q", uri, got)
		}
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Write([]byte("hi"))
				c.Close()
			}
		}()
		c, err := Dial(t.Context(), got)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "hi" {
			t.Errorf("%s: read %q, %v", got, b, err)
		}
		c.Close()
		ln.Close()
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left: %v", err)
	}
	for uri, want := range map[string]error{"gopher://x": ErrScheme, "net+tcp:/x": ErrURI, "net+tcp://": ErrURI, "": ErrURI,
		"shm://x?mode=fast": ErrURI, "shm://x?color=red": ErrURI, "tcp://127.0.0.1:1?partitions=two": ErrURI, "shm://x?%zz": ErrURI} {
		if _, err := Listen(t.Context(), uri); !errors.Is(err, want) {
			t.Errorf("listen %q: %v, want %v", uri, err, want)
		}
		if _, err := Dial(t.Context(), uri); !errors.Is(err, want) {
			t.Errorf("dial %q: %v, want %v", uri, err, want)
		}
	}
	if ListenerURI(listenTCP(t)) != "" {
		t.Error("a plain listener has a URI")
	}
}

// --only keeps the systems it names and refuses a run it would leave
// empty, naming the choices.
func TestOnly(t *testing.T) {
	env := quickEnv()
	env.Only = []string{"NET/unix"}
	got, err := keepNets(env, netNets())
	if err != nil || len(got) != 1 || got[0].label() != unixLabel {
		t.Fatalf("kept %v, %v", got, err)
	}
	env.Only = []string{"sock/rdma"}
	if _, err := runHTTP(t.Context(), env, netNets(), nil); !errors.Is(err, errNoSystem) || !strings.Contains(err.Error(), "net/tcp, net/unix") {
		t.Fatalf("--only sock/rdma: %v, want errNoSystem listing the systems", err)
	}
	if _, err := runLatency(t.Context(), env, netNets(), nil); !errors.Is(err, errNoSystem) || !strings.Contains(err.Error(), "net/unix, sockperf/tcp") {
		t.Fatalf("--only sock/rdma: %v, want errNoSystem listing the systems and sockperf", err)
	}
}

// Without a way to start servers, the systems are left out with the
// reason in the notes.
func TestNoCommand(t *testing.T) {
	env := quickEnv()
	env.Command = nil
	r, err := runThroughput(t.Context(), env, netNets(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 0 || !strings.Contains(strings.Join(r.Notes, "\n"), "net/tcp: no rows: bench: no way to run the rdmakit command") {
		t.Errorf("rows %v, notes %q", r.Rows, r.Notes)
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
