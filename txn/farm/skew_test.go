package farm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
)

// writeSkew runs, on a fresh database, goroutines that each pick a pair
// of doctors (x, y) on call, read both and take one off call if the
// other still is: the classic write skew. It returns the checker's
// the number of pairs left with no doctor on call (an invariant only
// serializable runs keep) and the checker's verdict on the traced
// history.
func writeSkew(t *testing.T, skip bool) (int, error) {
	b := newBed(t, 3, 0)
	cfg := b.config()
	cfg.SkipValidation = skip
	db := b.dbWith(cfg)
	ctx := tctx(t)
	const pairs = 8
	h := check.NewHistory()
	key := func(p int, side string) []byte { return []byte(fmt.Sprintf("doc/%d/%s", p, side)) }
	for p := range pairs {
		tx, _ := db.Begin(ctx)
		if err := tx.Put(key(p, "x"), []byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Put(key(p, "y"), []byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		h.Add(tx.(txn.Traced).Trace())
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(300 * time.Millisecond)
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for time.Now().Before(deadline) {
				p := rng.IntN(pairs)
				mine, other := key(p, "x"), key(p, "y")
				if rng.IntN(2) == 0 {
					mine, other = other, mine
				}
				tx, _ := db.Begin(ctx)
				a, err1 := tx.Get(mine)
				c, err2 := tx.Get(other)
				if err1 != nil || err2 != nil {
					tx.Abort()
					continue
				}
				if a[0] == 1 && c[0] == 1 {
					if err := tx.Put(mine, []byte{0}); err != nil {
						t.Error(err)
						return
					}
				} else if a[0] == 0 && c[0] == 0 {
					continue // both off: leave it (only a skew gets here)
				} else if err := tx.Put(key(p, "x"), []byte{1}); err != nil { // back on call
					t.Error(err)
					return
				} else if err := tx.Put(key(p, "y"), []byte{1}); err != nil {
					t.Error(err)
					return
				}
				err := tx.Commit()
				switch {
				case err == nil:
					h.Add(tx.(txn.Traced).Trace())
				case errors.Is(err, txn.ErrAborted):
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	none := 0
	if err := txn.Run(ctx, db, func(tx txn.Tx) error {
		none = 0
		for p := range pairs {
			a, err := tx.Get(key(p, "x"))
			if err != nil {
				return err
			}
			c, err := tx.Get(key(p, "y"))
			if err != nil {
				return err
			}
			if a[0] == 0 && c[0] == 0 {
				none++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("skip validation %v: %d transactions traced, %d pairs with nobody on call", skip, h.Len(), none)
	return none, h.Check()
}

// TestWriteSkewChecked: with VALIDATE the checker accepts the history and
// some doctor of every pair is on call.
func TestWriteSkewChecked(t *testing.T) {
	none, err := writeSkew(t, false)
	if err != nil {
		t.Fatalf("serializability: %v", err)
	}
	if none != 0 {
		t.Fatalf("%d pairs with nobody on call", none)
	}
}

// TestSkipValidationFailsChecker is the negative control: without
// VALIDATE, write skew commits and the checker finds the cycle.
func TestSkipValidationFailsChecker(t *testing.T) {
	for attempt := range 5 {
		none, err := writeSkew(t, true)
		var ce *check.CycleError
		if errors.As(err, &ce) {
			t.Logf("attempt %d: %v", attempt, err)
			if none == 0 {
				t.Log("(the skews were repaired later in the run)")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("five runs without validation and the checker found no cycle")
}
