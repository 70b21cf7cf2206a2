package kvtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/kv/stores"

	_ "github.com/rdmakit/rdmakit/transport/shm"
)

// TestCancelled runs porcupine on every design, on loop and tcp (and
// PRISM-KV and Smart-HT with a connection per slot, …/slot-qps, on shm
// too),
// with 5% of the operations cancelled at a random point while they run:
// the history stays linearizable, the clients keep working, and each
// one's Close returns within a second.
func TestCancelled(t *testing.T) {
	ctx := context.Background()
	for _, scheme := range []string{"loop", "tcp", "shm"} {
		for _, design := range append(stores.Designs, "prism-kv/slot-qps", "smart-ht/slot-qps") {
			if scheme == "shm" && !strings.HasSuffix(design, "/slot-qps") {
				continue
			}
			t.Run(scheme+"/"+design, func(t *testing.T) {
				b := kvtest.NewBed(t, scheme)
				var o stores.ClientOptions
				if d, ok := strings.CutSuffix(design, "/slot-qps"); ok {
					design, o.SlotConnect = d, b.SlotConnect(t)
				}
				srv, err := stores.NewServer(stores.Layout(design), b.NodePD, 10000, 64)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { srv.Close() }) // before the bed closes the devices
				if design == "smart-ht" && o.SlotConnect == nil {
					o.Runtime, o.Cache = b.Runtime(t, 2), race.NewSlotCache(0)
				}
				var cs []kv.Store
				for range 4 {
					qp, cq := b.Connect(t, stores.QPCap.MaxSendWR, stores.QPCap.MaxRecvWR, srv)
					c, err := stores.NewClient(ctx, design, b.PD, qp, cq, o)
					if err != nil {
						t.Fatal(err)
					}
					cs = append(cs, c)
				}
				within := 300 * time.Microsecond // a tcp round trip's order
				if scheme != "tcp" {
					within = 20 * time.Microsecond
				}
				kvtest.Linearizable(t, cs, kvtest.LinConfig{Ops: 4000, Cancel: 0.05, CancelWithin: within, OpTimeout: 3 * time.Second})
				for _, c := range cs {
					kvtest.CloseWithin(t, c, time.Second)
				}
			})
		}
	}
}
