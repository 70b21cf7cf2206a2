package peers

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// startPGTxn starts a server for a test and opens a pool of conns
// connections to it; both end with the test.
func startPGTxn(t *testing.T, conns int) *PGTxn {
	t.Helper()
	pg := startPostgres(t, PostgresOptions{})
	db, err := OpenPGTxn(t.Context(), pg.ConnString, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// sameOutcome runs ops one at a time with both execs and fails at the
// first whose delta or rejection differs; it returns the committed and
// rejected operations per kind.
func sameOutcome[O any](t *testing.T, w workload.TxnWorkload[O], ops []O, ref, sql func(context.Context, O) (int64, error)) (committed, rejected []int) {
	t.Helper()
	committed, rejected = make([]int, len(w.Kinds())), make([]int, len(w.Kinds()))
	for i, op := range ops {
		d1, err1 := ref(t.Context(), op)
		d2, err2 := sql(t.Context(), op)
		rej1, rej2 := errors.Is(err1, workload.ErrRejected), errors.Is(err2, workload.ErrRejected)
		if err1 != nil && !rej1 || err2 != nil && !rej2 {
			t.Fatalf("op %d %+v: reference %v, SQL %v", i, op, err1, err2)
		}
		if d1 != d2 || rej1 != rej2 {
			t.Fatalf("op %d %+v: reference delta %d rejected %v (%v), SQL delta %d rejected %v (%v)", i, op, d1, rej1, err1, d2, rej2, err2)
		}
		if rej1 {
			rejected[w.KindOf(op)]++
		} else {
			committed[w.KindOf(op)]++
		}
	}
	return committed, rejected
}

// draw draws n operations of w from a seeded source.
func draw[O any](w workload.TxnWorkload[O], n int, seed int64) []O {
	r := rand.New(rand.NewSource(seed))
	ops := make([]O, n)
	for i := range ops {
		ops[i] = w.Next(r)
	}
	return ops
}

// readAll reads keys from db in one transaction: the records there are.
func readAll(t *testing.T, db txn.DB, keys [][]byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := txn.Run(t.Context(), db, func(tx txn.Tx) error {
		clear(out)
		for _, k := range keys {
			v, err := tx.Get(k)
			if errors.Is(err, txn.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out[string(k)] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameData fails when the two stores' records differ.
func sameData(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("reference holds %d records, PostgreSQL %d", len(want), len(got))
	}
	bad := 0
	for k, v := range want {
		if g, ok := got[k]; !ok || string(g) != string(v) {
			if bad++; bad <= 5 {
				t.Errorf("record %s: reference %x, PostgreSQL %x (present %v)", k, v, g, ok)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("record %s only in PostgreSQL", k)
			}
		}
	}
}

func TestOpenPGTxnBadArguments(t *testing.T) {
	if _, err := OpenPGTxn(t.Context(), "host=/nonexistent", 0); err == nil {
		t.Error("a pool of 0 connections opened")
	}
	if _, err := OpenPGTxn(t.Context(), "host=/nonexistent port=1 connect_timeout=1", 1); err == nil {
		t.Error("a pool to no server opened")
	}
}

// A pool larger than the server allows fails, whole, without hanging.
func TestOpenPGTxnTooManyConnections(t *testing.T) {
	pg := startPostgres(t, PostgresOptions{MaxConnections: 5})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if db, err := OpenPGTxn(ctx, pg.ConnString, 8); err == nil {
		db.Close()
		t.Fatal("a pool of 8 connections opened on a server for 5")
	}
	db, err := OpenPGTxn(ctx, pg.ConnString, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Pool().Stat().TotalConns(); got != 5 {
		t.Errorf("%d connections open, want all 5", got)
	}
}
