package ford_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

func TestBasic(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	db := b.db()
	ctx := tctx(t)
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		if _, err := tx.Get([]byte("a")); !errors.Is(err, txn.ErrNotFound) {
			t.Fatalf("get of a missing key: %v", err)
		}
		if err := tx.Put([]byte("a"), []byte("1")); err != nil {
			return err
		}
		if err := tx.Insert([]byte("b"), []byte("2")); err != nil {
			return err
		}
		v, err := tx.Get([]byte("a"))
		if err != nil || string(v) != "1" {
			t.Fatalf("own write: %q %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db2 := b.db()
	tx, _ := db2.Begin(ctx)
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if v, err := tx.Get([]byte(k)); err != nil || !bytes.Equal(v, []byte(want)) {
			t.Fatalf("%s = %q %v, want %q", k, v, err, want)
		}
	}
	if err := tx.Insert([]byte("a"), []byte("x")); !errors.Is(err, txn.ErrExists) {
		t.Fatalf("insert of an existing key: %v", err)
	}
	if err := tx.Delete([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	reads, writes := tx.(txn.Traced).Trace()
	if len(reads) != 2 || len(writes) != 1 || writes[0].Version != 2 || !writes[0].Deleted {
		t.Fatalf("trace: reads %v writes %v", reads, writes)
	}
	st := db2.Stats()
	// Both records locked at execution (Insert, Delete): nothing to
	// validate; log, then write and unlock.
	if st.Commits != 1 || st.MaxCommitRounds != 2 || st.ReadWrite != 1 {
		t.Fatalf("stats %+v: want 1 read-write commit of 2 rounds", st)
	}
	tx, _ = db.Begin(ctx)
	if _, err := tx.Get([]byte("b")); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if sw, err := db.Sweep(ctx); err != nil || sw.Live+sw.Recovered != 0 {
		t.Fatalf("locks after commits: %+v %v", sw, err)
	}
}

// TestLayoutMismatch: a client with another layout is refused.
func TestLayoutMismatch(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	b.db()
	cfg := b.config()
	cfg.Layout.Buckets = 512
	if _, err := ford.Dial(tctx(t), cfg); !errors.Is(err, ford.ErrLayout) {
		t.Fatalf("another layout: %v, want ErrLayout", err)
	}
	big := smallLayout
	big.Buckets *= 4
	cfg = b.config()
	cfg.Layout = big
	if _, err := ford.Dial(tctx(t), cfg); !errors.Is(err, ford.ErrLayout) {
		t.Fatalf("a layout larger than the nodes' regions: %v, want ErrLayout", err)
	}
	cfg = b.config()
	cfg.Layout.F = 3
	if _, err := ford.Dial(tctx(t), cfg); !errors.Is(err, ford.ErrLayout) {
		t.Fatalf("3 backups on 3 nodes: %v, want ErrLayout", err)
	}
}

// TestSmallBankRounds: every SmallBank read-write commit takes at most
// three round trips after execution (validate, log, commit).
func TestSmallBankRounds(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	db := b.db()
	ctx := tctx(t)
	sb := &workload.SmallBank{Accounts: 300, HotAccounts: 30}
	if err := sb.Load(ctx, db, workload.TxnLoad{}); err != nil {
		t.Fatal(err)
	}
	before := db.Stats()
	res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 4, Duration: 200 * time.Millisecond, Seed: 3}, sb, db)
	if err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	rw := st.ReadWrite - before.ReadWrite
	if rw == 0 || st.MaxCommitRounds > 3 {
		t.Fatalf("%d read-write commits, at most %d rounds each: want some, ≤ 3", rw, st.MaxCommitRounds)
	}
	t.Logf("%d committed (%.0f/s); %.2f commit rounds per read-write commit; %.1f rounds per commit in all",
		res.Committed, res.Rate(), float64(st.CommitRounds-before.CommitRounds)/float64(rw),
		float64(st.Rounds-before.Rounds)/float64(st.Commits-before.Commits))
}

func u64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// TestWriteSkew: two doctors on call each read both and take themselves
// off. With validation the second aborts and the history is clean;
// without (the negative control) both commit and the checker finds the
// cycle.
func TestWriteSkew(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b := newBed(t, 3, smallLayout)
		cfg := b.config()
		cfg.SkipValidation = skip
		db := b.dbWith(cfg)
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
		t1, _ := db.Begin(ctx)
		t2, _ := db.Begin(ctx)
		for _, tx := range []txn.Tx{t1, t2} {
			for _, k := range []string{"x", "y"} {
				if v, err := tx.Get([]byte(k)); err != nil || binary.LittleEndian.Uint64(v) != 1 {
					t.Fatalf("read %s: %v %v", k, v, err)
				}
			}
		}
		if err := t1.Put([]byte("x"), u64(0)); err != nil {
			t.Fatal(err)
		}
		if err := t2.Put([]byte("y"), u64(0)); err != nil {
			t.Fatal(err)
		}
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
		switch {
		case skip && (e1 != nil || e2 != nil):
			t.Fatalf("without validation: commits %v, %v, want both", e1, e2)
		case !skip && (e1 == nil) == (e2 == nil):
			t.Fatalf("serializable: commits %v, %v, want exactly one aborted", e1, e2)
		case !skip && txn.ReasonOf(errors.Join(e1, e2)) != txn.ValidationFailed:
			t.Fatalf("abort %v, want validation-failed", errors.Join(e1, e2))
		}
	}
}
