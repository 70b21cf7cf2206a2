package farm_test

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
	"github.com/rdmakit/rdmakit/txn/farm"
)

// TestMain lets the test binary play a coordinator process
// (clientRole); logs below errors are left out.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	remotedev.TestMain(m)
}

var seq atomic.Int64

// bed is n FaRM nodes on a loop fabric of their own.
type bed struct {
	t       testing.TB
	fabric  string
	addrs   []string
	servers []*memnode.Server
	nodes   []*farm.Node
	clients atomic.Int64
	layout  farm.Layout
}

// newBed starts n nodes with lease lease (0: the default) and lays out
// a database with small values.
func newBed(t testing.TB, n int, lease time.Duration) *bed {
	return newBedWith(t, n, farm.NodeConfig{Lease: lease, LogSize: 1 << 20, MaxClients: 32})
}

// newBedWith starts n nodes configured by cfg.
func newBedWith(t testing.TB, n int, cfg farm.NodeConfig) *bed {
	t.Helper()
	b := &bed{t: t, fabric: fmt.Sprintf("farm-test-%d", seq.Add(1)), nodes: make([]*farm.Node, n)}
	for i := range n {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + b.fabric + fmt.Sprintf("/n%d", i), CM: "127.0.0.1:0",
			NewService: farm.Service(cfg, func(nd *farm.Node) { b.nodes[i] = nd }),
			Logger:     slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.addrs = append(b.addrs, srv.Info().CM)
		b.servers = append(b.servers, srv)
	}
	b.layout = farm.Layout{Nodes: b.addrs, Buckets: 1024, ValueSize: 256}
	return b
}

// config is a new client's configuration.
func (b *bed) config() farm.Config {
	return farm.Config{Device: fmt.Sprintf("loop://%s/c%d", b.fabric, b.clients.Add(1)), Nodes: b.addrs}
}

// db creates (the first time) or dials the database.
func (b *bed) db() *farm.DB { return b.dbWith(b.config()) }

func (b *bed) dbWith(cfg farm.Config) *farm.DB {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := farm.Create(ctx, cfg, b.layout)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { db.Close() })
	return db
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
