package prismtx_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

var seq atomic.Int64

// bed is n PRISM-TX nodes on a loop fabric of their own.
type bed struct {
	t       testing.TB
	fabric  string
	addrs   []string
	nodes   []*prismtx.Node
	clients atomic.Int64
}

func newBed(t testing.TB, n int) *bed {
	t.Helper()
	return newBedWith(t, n, prismtx.NodeConfig{Slots: 4096, Memory: 16 << 20, Stock: 256 << 10})
}

// newBedWith is newBed with nodes configured by nc.
func newBedWith(t testing.TB, n int, nc prismtx.NodeConfig) *bed {
	t.Helper()
	b := &bed{t: t, fabric: fmt.Sprintf("prismtx-test-%d", seq.Add(1)), nodes: make([]*prismtx.Node, n)}
	for i := range n {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: fmt.Sprintf("loop://%s/n%d", b.fabric, i), CM: "127.0.0.1:0",
			NewService: prismtx.Service(nc, func(nd *prismtx.Node) { b.nodes[i] = nd }),
			Logger:     slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.addrs = append(b.addrs, srv.Info().CM)
	}
	return b
}

// config is a new client's configuration.
func (b *bed) config() prismtx.Config {
	return prismtx.Config{Device: fmt.Sprintf("loop://%s/c%d", b.fabric, b.clients.Add(1)), Nodes: b.addrs}
}

// dial connects a client configured by cfg (b.config() with changes).
func (b *bed) dial(cfg prismtx.Config) *prismtx.DB {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := prismtx.Dial(ctx, cfg)
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
