package sockexp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sock-http, quick: a row per system and concurrency with a non-zero
// rate and latencies, net/tcp's ratio to itself 1, the sock systems'
// ratio notes, and no server left running.
func TestHTTPQuick(t *testing.T) {
	socks := sockNets()
	r, err := runHTTP(t.Context(), quickEnv(), netNets(), socks)
	if err != nil {
		t.Fatal(err)
	}
	noChildren(t)
	if want := (2 + len(socks)) * len(httpClients); len(r.Rows) != want {
		t.Fatalf("%d rows, want %d", len(r.Rows), want)
	}
	for _, row := range r.Rows {
		positive(t, r, row, "rate", "p50", "p99", "vs_tcp")
		if col(t, r, row, "system") == tcpLabel && col(t, r, row, "vs_tcp") != 1.0 {
			t.Errorf("%v: net/tcp against itself %v", row[:3], col(t, r, row, "vs_tcp"))
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, n := range socks {
		if !strings.Contains(notes, n.label()+" ("+n.mode+") requests per second against net/tcp, same run: 1 client(s) ×") {
			t.Errorf("no ratio note for %s: %s", n.label(), notes)
		}
	}
}

// A server that does not answer hello-world fails the point.
func TestHTTPWrongAnswer(t *testing.T) {
	ln := listenTCP(t)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("goodbye\n")) }))
	client := newHTTPClient(netNets()[0], "net+tcp://"+ln.Addr().String(), 2)
	defer client.CloseIdleConnections()
	if _, err := loadHTTP(t.Context(), client, 2, 10*time.Millisecond); !errors.Is(err, errHTTP) {
		t.Fatalf("load: %v, want errHTTP", err)
	}
}

// The HTTP app answers hello-world on its listener, over keep-alive
// connections that the client dials itself.
func TestHTTPApp(t *testing.T) {
	ln := serveInProcess(t, HTTP)
	var dials atomic.Int32
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		return Dial(ctx, "net+tcp://"+ln.Addr().String())
	}}}
	defer client.CloseIdleConnections()
	res, err := loadHTTP(t.Context(), client, 1, 200*time.Millisecond) // long enough for several requests on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	if res.requests < 2 || dials.Load() != 1 {
		t.Errorf("%d requests over %d connections, want several over one", res.requests, dials.Load())
	}
}
