package workload_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// faultyDB wraps a DB: every fifth Commit aborts with a lock conflict
// and every seventh Get with a timeout; it counts every abort its
// transactions returned, by reason, and the commits.
type faultyDB struct {
	txn.DB
	commits, gets atomic.Int64
	aborts        [txn.UserAbort + 1]atomic.Int64
	committed     atomic.Int64
}

type faultyTx struct {
	txn.Tx
	db *faultyDB
}

func (d *faultyDB) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &faultyTx{tx, d}, nil
}

func (d *faultyDB) count(err error) error {
	if r := txn.ReasonOf(err); r != 0 {
		d.aborts[r].Add(1)
	}
	return err
}

func (t *faultyTx) Get(key []byte) ([]byte, error) {
	if t.db.gets.Add(1)%7 == 0 {
		return nil, t.db.count(txn.Abort(txn.Timeout, key, context.DeadlineExceeded))
	}
	return t.Tx.Get(key)
}

func (t *faultyTx) Commit() error {
	if t.db.commits.Add(1)%5 == 0 {
		t.Tx.Abort()
		return t.db.count(txn.Abort(txn.LockConflict, nil, nil))
	}
	err := t.db.count(t.Tx.Commit())
	if err == nil {
		t.db.committed.Add(1)
	}
	return err
}

func (t *faultyTx) Trace() (reads, writes []txn.Access) { return t.Tx.(txn.Traced).Trace() }

// TestRunTxnTallies: RunTxn counts every abort by its reason, every
// commit by kind, the rejections, and the money the committed
// transactions moved; latencies are ordered; the traces check.
func TestRunTxnTallies(t *testing.T) {
	ctx := context.Background()
	sb := &workload.SmallBank{Accounts: 50, HotAccounts: 5, InitialBalance: 600}
	mem := txntest.NewMemDB()
	h := check.NewHistory()
	if err := sb.Load(ctx, mem, workload.TxnLoad{Trace: h.Add}); err != nil {
		t.Fatal(err)
	}
	db := &faultyDB{DB: mem}
	res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 4, Duration: 200 * time.Millisecond, Seed: 1, Trace: h.Add}, sb, db)
	if err != nil {
		t.Fatal(err)
	}
	for r := txn.LockConflict; r <= txn.UserAbort; r++ {
		if got, want := res.Aborts[r], db.aborts[r].Load(); got != want {
			t.Errorf("%v aborts: %d counted, %d returned", r, got, want)
		}
	}
	if res.Aborts[txn.LockConflict] == 0 || res.Aborts[txn.Timeout] == 0 {
		t.Errorf("injected aborts not counted: %v", res.Aborts)
	}
	if res.Committed != db.committed.Load() || res.Committed == 0 || res.Failed != 0 {
		t.Fatalf("%d commits counted, %d made, %d failed (%v)", res.Committed, db.committed.Load(), res.Failed, res.FirstErr)
	}
	var committed, rejected, delta int64
	for k, kr := range res.Kinds {
		committed, rejected, delta = committed+kr.Committed, rejected+kr.Rejected, delta+kr.Delta
		if kr.Name != sb.Kinds()[k] || kr.Committed == 0 {
			t.Errorf("kind %d: %+v", k, kr)
		}
		if kr.Rejected != 0 && k != int(workload.SendPayment) {
			t.Errorf("%s rejected %d times", kr.Name, kr.Rejected)
		}
	}
	if committed != res.Committed || rejected != res.Rejected || delta != res.Delta {
		t.Errorf("kinds add up to %d, %d, %d; totals %d, %d, %d", committed, rejected, delta, res.Committed, res.Rejected, res.Delta)
	}
	if res.Rejected == 0 {
		t.Error("no SendPayment rejected on a bank of 600-cent balances")
	}
	if res.P50 <= 0 || res.P99 < res.P50 || res.Rate() <= 0 || res.AbortRate() <= 0 {
		t.Errorf("p50 %v p99 %v rate %.0f abort rate %.2f", res.P50, res.P99, res.Rate(), res.AbortRate())
	}
	if err := sb.CheckMoney(ctx, mem, res); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}

// untraced hides its transactions' Trace.
type untraced struct{ txn.DB }

type untracedTx struct{ txn.Tx }

func (u untraced) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := u.DB.Begin(ctx)
	return untracedTx{tx}, err
}

// unreachable fails every Begin as a dead node would.
type unreachable struct{ txn.DB }

func (unreachable) Begin(context.Context) (txn.Tx, error) {
	return nil, txn.ErrUnreachable
}

// TestRunTxnFailures: a run asked for traces of a DB without them fails
// and says why; transactions of unknown outcome are counted apart.
func TestRunTxnFailures(t *testing.T) {
	ctx := context.Background()
	y := &workload.YCSBT{Keys: 100}
	mem := txntest.NewMemDB()
	if err := y.Load(ctx, untraced{mem}, workload.TxnLoad{Trace: func(_, _ []txn.Access) {}}); !errors.Is(err, workload.ErrNotTraced) {
		t.Fatalf("loading untraced with a trace: %v", err)
	}
	cfg := workload.TxnRun{Threads: 2, Duration: 20 * time.Millisecond, Trace: func(_, _ []txn.Access) {}}
	if _, err := workload.RunTxn(ctx, cfg, y, untraced{mem}); !errors.Is(err, workload.ErrNotTraced) {
		t.Fatalf("running untraced with a trace: %v", err)
	}
	res, err := workload.RunTxn(ctx, cfg, y, unreachable{mem})
	if !errors.Is(err, txn.ErrUnreachable) || res.Unknown == 0 || res.Failed != 0 || res.Committed != 0 {
		t.Fatalf("unreachable: %v, %+v", err, res)
	}
}

// TestRunTxnFunc: a target that is no txn.DB (as a SQL peer) runs the
// same operations and reports its own aborts.
func TestRunTxnFunc(t *testing.T) {
	tp := &workload.TATP{Subscribers: 1000}
	var mu sync.Mutex
	seen := map[workload.TATPKind]int{}
	exec := func(_ context.Context, s *workload.TxnSession, op workload.TATPOp) (int64, error) {
		mu.Lock()
		seen[op.Kind]++
		mu.Unlock()
		if op.Kind == workload.UpdateLocation {
			s.Abort(txn.ValidationFailed) // as a serialization failure retried once
		}
		return 0, nil
	}
	res, err := workload.RunTxnFunc(context.Background(), workload.TxnRun{Threads: 3, Duration: 50 * time.Millisecond}, tp, exec)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Kinds[workload.UpdateLocation].Committed; res.Aborts[txn.ValidationFailed] != n || n == 0 {
		t.Fatalf("%d aborts reported for %d UPDATE_LOCATIONs", res.Aborts[txn.ValidationFailed], n)
	}
	if int64(seen[workload.GetSubscriberData]) != res.Kinds[workload.GetSubscriberData].Committed {
		t.Fatalf("%d GET_SUBSCRIBER_DATA run, %d counted", seen[workload.GetSubscriberData], res.Kinds[workload.GetSubscriberData].Committed)
	}
}
