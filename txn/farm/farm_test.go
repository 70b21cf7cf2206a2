package farm_test

import (
	"bytes"
	"errors"
	"fmt"
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

// TestCrowdedTable fills small tables until a key finds no slot in its
// window (ErrFull, not an abort): every key that went in reads back from
// a client with no cached locations, past the first READ of its window
// too, and keys never written read as missing.
func TestCrowdedTable(t *testing.T) {
	b := newBed(t, 3, 0)
	b.layout.Buckets = 64
	db := b.db()
	ctx := tctx(t)
	var in []string
	for i := 0; ; i++ {
		k := fmt.Sprintf("crowd/%d", i)
		err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Insert([]byte(k), []byte(k)) })
		if errors.Is(err, txn.ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, k)
		if i > 3*64 {
			t.Fatal("more keys than slots went in")
		}
	}
	if len(in) < 3*64/3 {
		t.Fatalf("full after %d keys in 3 × 64 slots", len(in))
	}
	fresh := b.db()
	before := fresh.Stats().Reads
	err := txn.Run(ctx, fresh, func(tx txn.Tx) error {
		for _, k := range in {
			v, err := tx.Get([]byte(k))
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if string(v) != k {
				t.Fatalf("%s holds %q", k, v)
			}
		}
		for i := range 20 {
			if _, err := tx.Get([]byte(fmt.Sprintf("never/%d", i))); !errors.Is(err, txn.ErrNotFound) {
				return fmt.Errorf("never/%d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reads := fresh.Stats().Reads - before
	if reads <= uint64(len(in)+20) {
		t.Fatalf("%d READs for %d lookups: no lookup went past its first READ", reads, len(in)+20)
	}
	t.Logf("%d keys in 192 slots; %d READs for %d lookups (and validation)", len(in), reads, len(in)+20)
}
