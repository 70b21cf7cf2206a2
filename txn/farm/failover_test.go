package farm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// newFailoverBed starts n nodes that run a membership (Silence silence)
// on loopback TCP ports of their own.
func newFailoverBed(t *testing.T, n int, lease, silence time.Duration) *bed {
	t.Helper()
	members := freeAddrs(t, n)
	b := &bed{t: t, fabric: fmt.Sprintf("farm-failover-%d", seq.Add(1)), nodes: make([]*farm.Node, n)}
	cfg := farm.NodeConfig{Lease: lease, LogSize: 1 << 20, MaxClients: 32, Members: members, Silence: silence, Token: "tok",
		Logger: slog.New(slog.DiscardHandler)}
	for i := range n {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + b.fabric + fmt.Sprintf("/n%d", i), CM: "127.0.0.1:0",
			Token: "tok", NewService: farm.Service(cfg, func(nd *farm.Node) { b.nodes[i] = nd }),
			Logger: slog.New(slog.DiscardHandler)})
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

// TestConfigurationRPC: a client learns the configuration from the
// nodes, and the new one once a node is gone.
func TestConfigurationRPC(t *testing.T) {
	b := newFailoverBed(t, 3, 200*time.Millisecond, 200*time.Millisecond)
	cfg := b.config()
	cfg.Token = "tok"
	db := b.dbWith(cfg)
	ctx := tctx(t)
	c, err := db.Configuration(ctx)
	if err != nil || c.Epoch != 1 || c.Primaries[0] != 0 {
		t.Fatalf("%+v, %v", c, err)
	}
	b.servers[0].Close()
	for {
		c, err = db.Configuration(ctx)
		if err == nil && c.Epoch == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no epoch 2: %+v, %v", c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !c.Out[0] || c.Primaries[0] != 1 || len(c.Backups[0]) != 0 || len(c.Backups[2]) != 0 {
		t.Fatalf("%+v", c)
	}
	if nc, ok := b.nodes[2].Configuration(); !ok || nc.Epoch != 2 {
		t.Fatalf("node 2: %+v %v", nc, ok)
	}
}

// TestNoMembership: nodes without members answer ErrNoMembership.
func TestNoMembership(t *testing.T) {
	b := newBed(t, 3, 0)
	db := b.db()
	if _, err := db.Configuration(tctx(t)); !errors.Is(err, farm.ErrNoMembership) {
		t.Fatalf("err %v, want ErrNoMembership", err)
	}
	if _, ok := b.nodes[0].Configuration(); ok {
		t.Fatal("a node without members has a configuration")
	}
}
