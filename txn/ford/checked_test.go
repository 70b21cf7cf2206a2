package ford_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// minChecked is the committed transactions a checked run needs.
const minChecked = 5000

// runChecked runs w on each of dbs (3 goroutines each, at once) in
// 250 ms runs until at least minChecked transactions committed in all
// (bounded: 60 runs, ample under -race), every trace in h.
func runChecked[O any](t *testing.T, ctx context.Context, w workload.TxnWorkload[O], trace func(reads, writes []txn.Access), dbs ...txn.DB) []*workload.TxnResult {
	t.Helper()
	var out []*workload.TxnResult
	var total int64
	for run := 0; total < minChecked; run++ {
		if run == 60 {
			t.Fatalf("%d committed in 60 runs, want %d", total, minChecked)
		}
		results := make([]*workload.TxnResult, len(dbs))
		errs := make([]error, len(dbs))
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() {
				results[i], errs[i] = workload.RunTxn(ctx, workload.TxnRun{Threads: 3, Duration: 250 * time.Millisecond,
					Seed: int64(7 + 100*run + 10*i), Trace: trace}, w, db)
			})
		}
		wg.Wait()
		for i, res := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if res.Failed > 0 || res.Unknown > 0 {
				t.Fatalf("%d failed (first: %v), %d unknown", res.Failed, res.FirstErr, res.Unknown)
			}
			total += res.Committed
			out = append(out, res)
		}
	}
	return out
}

// TestSmallBankChecked: SmallBank on a contended bank, backup reads on
// for one client: the history is serializable and the money adds up.
func TestSmallBankChecked(t *testing.T) {
	db, _, n := checkedSmallBank(t, newBed(t, 3, smallLayout))
	t.Logf("%d transactions checked; client 1 %+v", n, db.Stats())
}

// checkedSmallBank runs SmallBank on a contended bank from two clients
// of b, the second reading backups, and fails t unless the history is
// serializable, the money adds up and no commit took more than three
// round trips. It returns the clients and the transactions checked.
func checkedSmallBank(t *testing.T, b *bed) (db, db2 *ford.DB, checked int) {
	t.Helper()
	db = b.db()
	cfg := b.config()
	cfg.BackupReads = true
	db2 = b.dbWith(cfg)
	ctx := tctx(t)
	sb := &workload.SmallBank{Accounts: 200, HotAccounts: 10}
	h := check.NewHistory()
	if err := sb.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
		t.Fatal(err)
	}
	runs := runChecked(t, ctx, sb, h.Add, db, db2)
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	if err := sb.CheckMoney(ctx, db, runs...); err != nil {
		t.Fatal(err)
	}
	if st, st2 := db.Stats(), db2.Stats(); st.MaxCommitRounds > 3 || st2.MaxCommitRounds > 3 {
		t.Fatalf("a commit of more than 3 rounds: %d, %d", st.MaxCommitRounds, st2.MaxCommitRounds)
	}
	return db, db2, h.Len()
}

// TestYCSBTChecked: YCSB-T under zipf 0.9 on 50 keys: serializable, and
// the counters add up to the committed increments.
func TestYCSBTChecked(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	db := b.db()
	ctx := tctx(t)
	y := &workload.YCSBT{Keys: 50, Zipf: 0.9}
	h := check.NewHistory()
	if err := y.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
		t.Fatal(err)
	}
	var increments atomic.Int64
	runChecked(t, ctx, y, func(reads, writes []txn.Access) {
		h.Add(reads, writes)
		increments.Add(int64(len(writes)))
	}, db)
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	var sum int64
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		sum = 0
		for i := range 50 {
			v, err := tx.Get(workload.YCSBTKey(uint64(i)))
			if err != nil {
				return err
			}
			sum += int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum != increments.Load() {
		t.Fatalf("counters add up to %d, the committed transactions made %d increments", sum, increments.Load())
	}
	t.Logf("%d transactions checked", h.Len())
}

// TestNegativeControlUnderLoad: SmallBank without validation makes the
// checker find a cycle.
func TestNegativeControlUnderLoad(t *testing.T) {
	ctx := tctx(t)
	for attempt := 1; ; attempt++ {
		b := newBed(t, 3, smallLayout)
		cfg := b.config()
		cfg.SkipValidation = true
		db := b.dbWith(cfg)
		sb := &workload.SmallBank{Accounts: 100, HotAccounts: 2}
		h := check.NewHistory()
		if err := sb.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
			t.Fatal(err)
		}
		if _, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 8, Duration: 150 * time.Millisecond, Trace: h.Add}, sb, db); err != nil {
			t.Fatal(err)
		}
		var ce *check.CycleError
		if cerr := h.Check(); errors.As(cerr, &ce) {
			t.Logf("attempt %d: %d transactions: %v", attempt, h.Len(), ce)
			return
		}
		if attempt == 5 {
			t.Fatalf("no cycle in 5 runs of SmallBank without validation (%d transactions in the last)", h.Len())
		}
	}
}
