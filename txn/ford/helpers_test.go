package ford_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// TestMain lets the test binary play a memory node process
// (failover_tcp_test.go).
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	remotedev.TestMain(m)
}

var seq atomic.Int64

// bed is n memory nodes on a loop fabric of their own, sized for layout.
type bed struct {
	t       testing.TB
	fabric  string
	addrs   []string
	servers []*memnode.Server
	clients atomic.Int64
	layout  ford.Layout
	smart   *ford.SmartConfig // every client Smart-DTX with this configuration
}

// smallLayout is a layout of small values, quick to set up.
var smallLayout = ford.Layout{Buckets: 1024, ValueSize: 128, Coordinators: 32, LogSize: 8 << 10}

// newBed starts n memory nodes serving layout.
func newBed(t testing.TB, n int, layout ford.Layout) *bed {
	t.Helper()
	b := &bed{t: t, fabric: fmt.Sprintf("ford-test-%d", seq.Add(1)), layout: layout}
	for i := range n {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: fmt.Sprintf("loop://%s/n%d", b.fabric, i), CM: "127.0.0.1:0",
			Memory: layout.NodeBytes(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.addrs = append(b.addrs, srv.Info().CM)
		b.servers = append(b.servers, srv)
	}
	return b
}

// config is a new client's configuration.
func (b *bed) config() ford.Config {
	return ford.Config{Device: fmt.Sprintf("loop://%s/c%d", b.fabric, b.clients.Add(1)), Nodes: b.addrs, Layout: b.layout, Smart: b.smart}
}

// db dials a client.
func (b *bed) db() *ford.DB { return b.dbWith(b.config()) }

func (b *bed) dbWith(cfg ford.Config) *ford.DB {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := ford.Dial(ctx, cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { db.Close() })
	return db
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
