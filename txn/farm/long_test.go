package farm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
	"github.com/rdmakit/rdmakit/workload"
)

// TestWorkloadsLong runs SmallBank, TATP and YCSB-T (zipf 0.99) for
// FARM_LONG seconds each (skipped when unset) over three loop nodes with
// 8 threads: every committed transaction is checked for
// serializability, SmallBank's money for conservation; rates, latencies,
// aborts and round trips per commit are logged.
func TestWorkloadsLong(t *testing.T) {
	secs := envInt("FARM_LONG", 0)
	if secs == 0 {
		t.Skip("FARM_LONG=seconds runs it")
	}
	d := time.Duration(secs) * time.Second
	t.Run("SmallBank", func(t *testing.T) {
		sb := &workload.SmallBank{Accounts: 10000, HotAccounts: 1000}
		b := newBedWith(t, 3, farm.NodeConfig{MaxClients: 32})
		b.layout.Buckets, b.layout.ValueSize = 1<<16, 64
		db := b.db()
		res := longRun(t, db, d, sb, sb.Load)
		if err := sb.CheckMoney(tctx(t), db, res); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("TATP", func(t *testing.T) {
		tp := &workload.TATP{Subscribers: 5000}
		b := newBedWith(t, 3, farm.NodeConfig{MaxClients: 32})
		b.layout.Buckets, b.layout.ValueSize = 1<<16, 128
		longRun(t, b.db(), d, tp, tp.Load)
	})
	t.Run("YCSBT", func(t *testing.T) {
		y := &workload.YCSBT{Keys: 10000, Zipf: 0.99}
		b := newBedWith(t, 3, farm.NodeConfig{MaxClients: 32})
		b.layout.Buckets, b.layout.ValueSize = 1<<14, 128
		longRun(t, b.db(), d, y, y.Load)
	})
}

// longRun loads w into db, runs it for d with the checker on, and logs
// what it measured.
func longRun[O any](t *testing.T, db *farm.DB, d time.Duration, w workload.TxnWorkload[O], load func(context.Context, txn.DB, workload.TxnLoad) error) *workload.TxnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	h := check.NewHistory()
	if err := load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
		t.Fatal(err)
	}
	before := db.Stats()
	res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 8, Duration: d, Seed: 1, Trace: h.Add}, w, db)
	if err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	if res.Failed > 0 {
		t.Fatalf("%d failed (first: %v)", res.Failed, res.FirstErr)
	}
	if err := h.Check(); err != nil {
		var re *check.ReadError
		var we *check.WriteError
		key := ""
		if errors.As(err, &re) {
			key = re.Key
		} else if errors.As(err, &we) {
			key = we.Key
		}
		for i, tx := range h.Txns() {
			for _, a := range append(append([]txn.Access{}, tx.Reads...), tx.Writes...) {
				if a.Key == key {
					t.Logf("T%d: reads %v writes %v", i, tx.Reads, tx.Writes)
					break
				}
			}
		}
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	c := float64(st.Commits - before.Commits)
	t.Logf("%d committed (%.0f/s), p50 %v p99 %v, abort rate %.3f, %d unknown; per commit: %.2f round trips (%.2f READs, %.2f log writes, %.2f LOCKs); %d checked",
		res.Committed, res.Rate(), res.P50, res.P99, res.AbortRate(), res.Unknown,
		float64(st.RoundTrips()-before.RoundTrips())/c, float64(st.Reads-before.Reads)/c, float64(st.LogWrites-before.LogWrites)/c,
		float64(st.RPCs-before.RPCs)/c, h.Len())
	return res
}
