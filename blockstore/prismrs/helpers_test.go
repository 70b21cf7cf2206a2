package prismrs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
)

var seq atomic.Int64

// bed is n replicas on a loop fabric of their own (or on tcp devices).
type bed struct {
	t        testing.TB
	scheme   string
	fabric   string
	names    []string // the replicas' node names in the fabric
	addrs    []string // their cm addresses
	servers  []*memnode.Server
	replicas []*replica.Replica
	clients  atomic.Int64
	thrifty  bool // clients send phases to a majority first (Config.Thrifty)
}

func newBed(t testing.TB, n int) *bed { return newBedOn(t, "loop", n) }

// device is the URI of a new device named name.
func (b *bed) device(name string) string {
	if b.scheme == "tcp" {
		return "tcp://127.0.0.1:0"
	}
	return "loop://" + b.fabric + "/" + name
}

func newBedOn(t testing.TB, scheme string, n int) *bed {
	t.Helper()
	b := &bed{t: t, scheme: scheme, fabric: fmt.Sprintf("prismrs-test-%d", seq.Add(1)), replicas: make([]*replica.Replica, n)}
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: b.device(name), CM: "127.0.0.1:0",
			NewService: replica.Service(replica.Config{MaxMemory: 256 << 20, Spare: 1024}, func(r *replica.Replica) { b.replicas[i] = r }),
			Logger:     slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.names = append(b.names, name)
		b.addrs = append(b.addrs, srv.Info().CM)
		b.servers = append(b.servers, srv)
	}
	return b
}

func (b *bed) fab() *loop.Fabric { return loop.Get(b.fabric) }

// config is a new client's configuration.
func (b *bed) config() prismrs.Config {
	return prismrs.Config{Device: b.device(fmt.Sprintf("c%d", b.clients.Add(1))), Replicas: b.addrs, Thrifty: b.thrifty}
}

// create creates the volume and returns its first client.
func (b *bed) create(bs int, blocks uint64) *prismrs.Client {
	return b.createWith(b.config(), bs, blocks)
}

// createWith is create with the client's configuration cfg.
func (b *bed) createWith(cfg prismrs.Config, bs int, blocks uint64) *prismrs.Client {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := prismrs.Create(ctx, cfg, bs, blocks)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { c.Close() })
	return c
}

// dial connects one more client.
func (b *bed) dial() *prismrs.Client {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := prismrs.Dial(ctx, b.config())
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { c.Close() })
	return c
}

func block(bs int, v byte) []byte {
	d := make([]byte, bs)
	for i := range d {
		d[i] = v + byte(i%7)
	}
	return d
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
