package sockexp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// App is what a server does with its connections.
type App string

// The apps a server runs.
const (
	// Echo writes every byte it reads back on the same connection: the
	// ping-pong peer of sock-latency.
	Echo App = "echo"
	// Sink reads batches and discards them, acknowledging each with one
	// byte: the receiver of sock-throughput. A batch is its length L as
	// 8 bytes big-endian (the length included) and L−8 bytes more.
	Sink App = "sink"
	// HTTP runs net/http's server with one handler answering every
	// request with HelloBody: the server of sock-http.
	HTTP App = "http"
	// Mux lets each connection pick its app with the first byte it
	// sends: MuxEcho for Echo, MuxSink for Sink (any other byte closes
	// the connection). The server of sock-isolation, whose latency and
	// bulk flows share one listener.
	Mux App = "mux"
)

// The first byte of a connection to a Mux server.
const (
	// MuxEcho makes the rest of the connection Echo.
	MuxEcho byte = 'e'
	// MuxSink makes the rest of the connection Sink.
	MuxSink byte = 's'
)

// HelloBody is the body of every HTTP answer.
const HelloBody = "hello, world\n"

// Apps lists the apps a server can run.
var Apps = []App{Echo, Sink, HTTP, Mux}

// ErrApp is returned for an app no server runs.
var ErrApp = errors.New("sockexp: unknown app")

// ParseApp returns the app named s.
func ParseApp(s string) (App, error) {
	for _, a := range Apps {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w %q (want echo, sink, http or mux)", ErrApp, s)
}

// Sink batches: a length of at least sinkHeader bytes, at most
// MaxSinkBatch.
const (
	sinkHeader = 8
	// MaxSinkBatch is the longest batch a sink accepts; a longer
	// announced length closes the connection.
	MaxSinkBatch = 1 << 30
)

// errBatch is a sink batch whose header is out of bounds.
var errBatch = errors.New("sockexp: sink batch length out of bounds")

// errSelector is a Mux connection whose first byte picks no app.
var errSelector = errors.New("sockexp: mux: unknown app selector")

// echoBuffer is how much an echo server reads at once: the largest
// message of sock-latency.
const echoBuffer = 64 << 10

// sinkBuffer is how much a sink reads at once.
const sinkBuffer = 256 << 10

// Serve runs app on ln's connections until ctx ends, then closes ln and
// every connection and returns nil; it returns the listener's error if
// accepting fails otherwise.
func Serve(ctx context.Context, ln net.Listener, app App) error {
	if app == HTTP {
		return serveHTTP(ctx, ln)
	}
	var handle func(net.Conn) error
	switch app {
	case Echo:
		handle = echo
	case Sink:
		handle = sink
	case Mux:
		handle = mux
	default:
		return fmt.Errorf("%w %q", ErrApp, app)
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sockexp: accept: %w", err)
		}
		mu.Lock()
		if ctx.Err() != nil { // AfterFunc has run: close it ourselves
			mu.Unlock()
			c.Close()
			continue
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			err := handle(c)
			c.Close()
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
				slog.Debug("sockexp: connection ended", "app", app, "remote", c.RemoteAddr(), "err", err)
			}
		})
	}
}

// echo writes back what it reads until the connection ends.
func echo(c net.Conn) error {
	buf := make([]byte, echoBuffer)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// mux reads the connection's first byte and runs the app it picks.
func mux(c net.Conn) error {
	var sel [1]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil {
		return err
	}
	switch sel[0] {
	case MuxEcho:
		return echo(c)
	case MuxSink:
		return sink(c)
	}
	return fmt.Errorf("%w %#x", errSelector, sel[0])
}

// sink reads batches, acknowledging each, until the connection ends.
func sink(c net.Conn) error {
	buf := make([]byte, sinkBuffer)
	ack := []byte{1}
	for {
		if _, err := io.ReadFull(c, buf[:sinkHeader]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint64(buf[:sinkHeader])
		if n < sinkHeader || n > MaxSinkBatch {
			return fmt.Errorf("%w: %d", errBatch, n)
		}
		for left := int(n) - sinkHeader; left > 0; {
			m, err := c.Read(buf[:min(left, len(buf))])
			left -= m
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		if _, err := c.Write(ack); err != nil {
			return err
		}
	}
}

// serveHTTP runs the hello-world handler on ln until ctx ends.
func serveHTTP(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, HelloBody)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	if ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("sockexp: http: %w", err)
}

// ServeURI listens at uri, writes one line saying where it listens
// ("sockexp: listening on URI (app APP)", the URI with the port it got
// for port 0) to w, and runs app until ctx ends: the body of `rdmakit
// sock serve`.
func ServeURI(ctx context.Context, w io.Writer, uri string, app App) error {
	if _, err := ParseApp(string(app)); err != nil {
		return err
	}
	ln, err := Listen(ctx, uri)
	if err != nil {
		return err
	}
	defer ln.Close()
	if _, err := fmt.Fprintf(w, "sockexp: listening on %s (app %s)\n", ListenerURI(ln), app); err != nil {
		return fmt.Errorf("sockexp: announce: %w", err)
	}
	return Serve(ctx, ln, app)
}
