package stores_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// BenchmarkDial measures a kv client's dial to a store node served by
// memnode, as the kv command does it: the cm exchange with the store
// clients' RNR pacing, then the client's first RPC (the node's layout).
func BenchmarkDial(b *testing.B) {
	for _, scheme := range []string{"loop", "tcp"} {
		b.Run(scheme, func(b *testing.B) {
			uri := func(name string) string {
				if scheme == "tcp" {
					return "tcp://127.0.0.1:0"
				}
				return fmt.Sprintf("loop://stores-dial-%d/%s", b.N, name)
			}
			ctx := context.Background()
			srv, err := memnode.Start(ctx, memnode.Config{Device: uri("node"), CM: "127.0.0.1:0", Probe: 20 * time.Millisecond,
				NewService: stores.Service("pilaf", 1000, 64), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			dev, err := verbs.Open(uri("client"))
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Close()
			pd, _ := dev.AllocPD()
			hello := memnode.Hello{Service: "pilaf"}.Marshal()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cq, err := dev.CreateCQ(4096)
				if err != nil {
					b.Fatal(err)
				}
				conn, err := cm.Dial(ctx, dev, srv.Info().CM, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap,
					Access: verbs.AccessAll, MinRNRTimer: stores.ClientMinRNR, RNRRetry: stores.ClientRNRRetry, PrivateData: hello})
				if err != nil {
					b.Fatal(err)
				}
				c, err := stores.NewClient(ctx, "pilaf", pd, conn.QP(), cq, stores.ClientOptions{})
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
				conn.Close()
				cq.Destroy()
			}
		})
	}
}
