package kvtest_test

import (
	"context"
	"testing"

	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/stores"
)

// TestBedConnectPostsReceives connects a client of each design on a bed
// that serves connections only once their first request has arrived:
// Connect posts the node's receives before it connects the client, so
// the first RPC (the client's layout request) succeeds.
func TestBedConnectPostsReceives(t *testing.T) {
	ctx := context.Background()
	for _, scheme := range []string{"loop", "tcp"} {
		for _, design := range []string{"pilaf", "prism-kv", "race"} {
			t.Run(scheme+"/"+design, func(t *testing.T) {
				b := kvtest.NewBed(t, scheme)
				b.Late = true
				srv, err := stores.NewServer(design, b.NodePD, 1000, 64)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { srv.Close() }) // before the bed closes the devices
				qp, cq := b.Connect(t, stores.QPCap.MaxSendWR, stores.QPCap.MaxRecvWR, srv)
				c, err := stores.NewClient(ctx, design, b.PD, qp, cq, stores.ClientOptions{})
				if err != nil {
					t.Fatalf("first RPC: %v", err)
				}
				defer c.Close()
				if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
