package prismtx_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
)

// TestWriteSkew is the negative control: two doctors on call, x and y,
// each transaction reads both and takes one off call if the other is
// on. Serializable, the second to commit aborts (its read of the key
// the first wrote fails validation) and one doctor stays on call; with
// SkipValidation both commit and nobody is on call — the write skew a
// serializability checker must catch.
func TestWriteSkew(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b := newBed(t, 3)
		cfg := b.config()
		cfg.SkipValidation = skip
		db := b.dial(cfg)
		ctx := tctx(t)
		put(t, db, "x", 1)
		put(t, db, "y", 1)
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
		var sum uint64
		err := txn.Run(ctx, db, func(tx txn.Tx) error {
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
