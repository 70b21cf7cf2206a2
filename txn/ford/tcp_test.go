package ford_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// TestTCP runs checked SmallBank over the tcp transport: three memory
// nodes and two clients, each its own device, as processes would.
func TestTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("tcp sockets")
	}
	var nodes []string
	for range 3 {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			Memory: smallLayout.NodeBytes(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		nodes = append(nodes, srv.Info().CM)
	}
	b := &bed{t: t, addrs: nodes, layout: smallLayout}
	ctx := tctx(t)
	dial := func() *ford.DB {
		return b.dbWith(ford.Config{Device: "tcp://127.0.0.1:0", Nodes: nodes, Layout: smallLayout})
	}
	db1, db2 := dial(), dial()
	sb := &workload.SmallBank{Accounts: 100, HotAccounts: 10}
	h := check.NewHistory()
	if err := sb.Load(ctx, db1, workload.TxnLoad{Trace: h.Add}); err != nil {
		t.Fatal(err)
	}
	var runs []*workload.TxnResult
	for _, db := range []*ford.DB{db1, db2} {
		res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 4, Duration: 200 * time.Millisecond, Seed: 5, Trace: h.Add}, sb, db)
		if err != nil || res.Failed > 0 || res.Committed == 0 {
			t.Fatalf("%v: %d committed, %d failed (%v)", err, res.Committed, res.Failed, res.FirstErr)
		}
		runs = append(runs, res)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	if err := sb.CheckMoney(ctx, db2, runs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions over tcp; %+v", h.Len(), db1.Stats())
}
