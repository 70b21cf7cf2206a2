package txntest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// TestMemDB: MemDB passes the conformance suite.
func TestMemDB(t *testing.T) {
	Run(t, func(*testing.T) txn.DB { return NewMemDB() })
}

// lostUpdate runs two read-modify-writes of one key that overlap, T1
// committing first, recording the traces of those that commit; it
// returns T2's Commit error.
func lostUpdate(t *testing.T, db txn.DB, h *check.History) error {
	ctx := context.Background()
	traced := func(tx txn.Tx) {
		h.Add(tx.(txn.Traced).Trace())
	}
	load, _ := db.Begin(ctx)
	if err := load.Put([]byte("x"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	if err := load.Commit(); err != nil {
		t.Fatal(err)
	}
	traced(load)
	t1, _ := db.Begin(ctx)
	t2, _ := db.Begin(ctx)
	for _, tx := range []txn.Tx{t1, t2} {
		v, err := tx.Get([]byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Put([]byte("x"), append(v, '+')); err != nil {
			t.Fatal(err)
		}
	}
	if err := t1.Commit(); err != nil {
		t.Fatal(err)
	}
	traced(t1)
	err := t2.Commit()
	if err == nil {
		traced(t2)
	}
	return err
}

// TestNegativeControl: the same overlapping read-modify-writes abort the
// second on a MemDB, and commit both on an Unvalidated one, where the
// checker finds the lost update.
func TestNegativeControl(t *testing.T) {
	h := check.NewHistory()
	if err := lostUpdate(t, NewMemDB(), h); txn.ReasonOf(err) != txn.ValidationFailed {
		t.Fatalf("validated: the second commit returned %v, want a validation abort", err)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	h = check.NewHistory()
	if err := lostUpdate(t, NewMemDB(Unvalidated()), h); err != nil {
		t.Fatalf("unvalidated: %v", err)
	}
	var ce *check.CycleError
	if err := h.Check(); !errors.As(err, &ce) || ce.Class() != "G2" || len(ce.Cycle) != 2 {
		t.Fatalf("the checker let a lost update through: %v", err)
	}
}

// TestNegativeControlUnderLoad: SmallBank from many goroutines on an
// Unvalidated MemDB: the checker reports a cycle and the money check
// fails (each run is short; a few are allowed for the goroutines to
// overlap on two hot accounts).
func TestNegativeControlUnderLoad(t *testing.T) {
	ctx := context.Background()
	for attempt := 1; ; attempt++ {
		db := NewMemDB(Unvalidated())
		sb := &workload.SmallBank{Accounts: 100, HotAccounts: 2}
		h := check.NewHistory()
		if err := sb.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
			t.Fatal(err)
		}
		res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 8, Duration: 100 * time.Millisecond, Trace: h.Add}, sb, db)
		if err != nil {
			t.Fatal(err)
		}
		cerr, merr := h.Check(), sb.CheckMoney(ctx, db, res)
		var ce *check.CycleError
		if errors.As(cerr, &ce) {
			t.Logf("attempt %d: %d transactions: %v; money: %v", attempt, h.Len(), ce, merr)
			return
		}
		if cerr != nil || merr != nil || attempt == 10 {
			t.Fatalf("after %d runs: checker %v, money %v: want a cycle", attempt, cerr, merr)
		}
	}
}
