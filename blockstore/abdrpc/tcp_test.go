package abdrpc_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
)

// TestTCP: the same client over tcp devices, with a token (which the
// tcp devices check too), and a replica closed under it.
func TestTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var addrs []string
	var srvs []*memnode.Server
	for range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0", Token: "tok",
			NewService: replica.Service(small, nil), Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		srvs = append(srvs, srv)
		addrs = append(addrs, srv.Info().CM)
	}
	cfg := abdrpc.Config{Replicas: addrs, Device: "tcp://127.0.0.1:0", Token: "tok", Logger: discard}
	if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: 4096, Blocks: 8}); err != nil {
		t.Fatal(err)
	}
	c, err := abdrpc.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		if i == 2 {
			srvs[0].Close()
		}
		data := bytes.Repeat([]byte{byte(i + 1)}, 4096)
		if err := c.Write(ctx, 5, data); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got, err := c.Read(ctx, 5, nil); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
}
