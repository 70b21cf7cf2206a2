package prismtx_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// TestWriteSkew is the negative control: two doctors on call, x and y,
// each transaction reads both and takes one off call if the other is
// on. Serializable, the second to commit aborts (its read of the key
// the first wrote fails validation) and one doctor stays on call; with
// SkipValidation both commit and nobody is on call — a write skew, which
// the serializability checker reports as a cycle (and passes the
// serializable run).
func TestWriteSkew(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b := newBed(t, 3)
		cfg := b.config()
		cfg.SkipValidation = skip
		db := b.dial(cfg)
		ctx := tctx(t)
		h := check.NewHistory()
		for _, k := range []string{"x", "y"} {
			load, _ := db.Begin(ctx)
			load.Put([]byte(k), u64(1))
			if err := load.Commit(); err != nil {
				t.Fatal(err)
			}
			h.Add(load.(txn.Traced).Trace())
		}
		var err error
		t1, _ := db.Begin(ctx)
		t2, _ := db.Begin(ctx)
		for _, tx := range []txn.Tx{t1, t2} {
			for _, k := range []string{"x", "y"} {
				if v, err := tx.Get([]byte(k)); err != nil || binary.LittleEndian.Uint64(v) != 1 {
					t.Fatalf("read %s: %v %v", k, v, err)
				}
			}
		}
		t1.Put([]byte("x"), u64(0))
		t2.Put([]byte("y"), u64(0))
		e1, e2 := t1.Commit(), t2.Commit()
		for _, c := range []struct {
			tx  txn.Tx
			err error
		}{{t1, e1}, {t2, e2}} {
			if c.err == nil {
				h.Add(c.tx.(txn.Traced).Trace())
			}
		}
		var ce *check.CycleError
		if cerr := h.Check(); skip != errors.As(cerr, &ce) {
			t.Fatalf("skip validation %v: the checker says %v", skip, cerr)
		}
		var sum uint64
		err = txn.Run(ctx, db, func(tx txn.Tx) error {
			x, err := tx.Get([]byte("x"))
			if err != nil {
				return err
			}
			y, err := tx.Get([]byte("y"))
			sum = binary.LittleEndian.Uint64(x) + binary.LittleEndian.Uint64(y)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case skip && (e1 != nil || e2 != nil || sum != 0):
			t.Fatalf("without validation: commits %v, %v; %d on call, want both committed and 0", e1, e2, sum)
		case !skip && (e1 != nil || !errors.Is(e2, txn.ErrAborted) || sum != 1):
			t.Fatalf("serializable: commits %v, %v; %d on call, want the second aborted and 1", e1, e2, sum)
		}
		if !skip && txn.ReasonOf(e2) != txn.ValidationFailed {
			t.Fatalf("the second aborted for %v, want validation-failed", txn.ReasonOf(e2))
		}
	}
}

// TestNegativeControlUnderLoad: SmallBank from eight goroutines with
// SkipValidation on two hot accounts: the checker finds a cycle (each run
// is short; a few are allowed for the goroutines to overlap).
func TestNegativeControlUnderLoad(t *testing.T) {
	ctx := tctx(t)
	for attempt := 1; ; attempt++ {
		b := newBed(t, 3)
		cfg := b.config()
		cfg.SkipValidation = true
		db := b.dial(cfg)
		sb := &workload.SmallBank{Accounts: 100, HotAccounts: 2}
		h := check.NewHistory()
		if err := sb.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
			t.Fatal(err)
		}
		res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 8, Duration: 100 * time.Millisecond, Trace: h.Add}, sb, db)
		if err != nil {
			t.Fatal(err)
		}
		var ce *check.CycleError
		if cerr := h.Check(); errors.As(cerr, &ce) {
			t.Logf("attempt %d: %d transactions: %v; money: %v", attempt, h.Len(), ce, sb.CheckMoney(ctx, db, res))
			return
		}
		if attempt == 5 {
			t.Fatalf("no cycle in 5 runs of SmallBank without validation (%d transactions in the last)", h.Len())
		}
	}
}
