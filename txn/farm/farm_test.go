package farm_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
)

func TestBasic(t *testing.T) {
	b := newBed(t, 3, 0)
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
		v, err := tx.Get([]byte(k))
		if err != nil || !bytes.Equal(v, []byte(want)) {
			for i, n := range b.nodes {
				t.Logf("node %d: %+v", i, n.Stats())
			}
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
	tx, _ = db.Begin(ctx)
	if _, err := tx.Get([]byte("b")); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	st := db2.Stats()
	if st.Commits != 1 || st.RPCs != 1 || st.LogWrites < 2 {
		t.Fatalf("stats %+v: want 1 commit, 1 LOCK, 2 log writes (one backup, one primary) and a truncation perhaps", st)
	}
}
