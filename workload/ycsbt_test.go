package workload_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// TestYCSBTNext: 1 to 4 distinct keys in range; zipf concentrates the
// draws on the popular keys, the more so the larger its constant, and
// uniform does not; goroutines drawing at once share the generators
// safely (run with -race).
func TestYCSBTNext(t *testing.T) {
	const keys, n = 10_000, 50_000
	hotShare := func(y *workload.YCSBT) float64 {
		r := rand.New(rand.NewSource(4))
		sizes := map[int]int{}
		hot := 0
		for range n {
			op := y.Next(r)
			sizes[op.N]++
			seen := map[uint64]bool{}
			for _, k := range op.Keys[:op.N] {
				if k >= keys || seen[k] {
					t.Fatalf("%+v: key out of range or repeated", op)
				}
				seen[k] = true
				if k < keys/100 {
					hot++
				}
			}
		}
		for size := 1; size <= 4; size++ {
			near(t, "share of transactions of each size", float64(sizes[size])/n, 0.25, 0.01)
		}
		return float64(hot) / float64(n*5/2)
	}
	uniform := hotShare(&workload.YCSBT{Keys: keys})
	z5 := hotShare(&workload.YCSBT{Keys: keys, Zipf: 0.5})
	z99 := hotShare(&workload.YCSBT{Keys: keys, Zipf: 0.99})
	near(t, "uniform: share of the first 1% of keys", uniform, 0.01, 0.002)
	if !(z5 > 2*uniform && z99 > 2*z5) {
		t.Fatalf("share of the first 1%% of keys: uniform %.3f, zipf 0.5 %.3f, zipf 0.99 %.3f: want growing skew", uniform, z5, z99)
	}

	y := &workload.YCSBT{Keys: keys, Zipf: 0.9, MinKeys: 2, MaxKeys: 2}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for range 1000 {
				if op := y.Next(r); op.N != 2 {
					t.Errorf("%d keys, want 2", op.N)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// counter reads record n's counter.
func counter(t *testing.T, db txn.DB, n uint64) uint64 {
	t.Helper()
	return binary.BigEndian.Uint64(get(t, db, workload.YCSBTKey(n)))
}

// TestYCSBTExec: each key of a transaction is incremented; values keep
// their size; bad configurations are refused.
func TestYCSBTExec(t *testing.T) {
	ctx := context.Background()
	y := &workload.YCSBT{Keys: 10, ValueSize: 100}
	db := txntest.NewMemDB()
	if err := y.Load(ctx, db, workload.TxnLoad{}); err != nil {
		t.Fatal(err)
	}
	op := workload.YCSBTOp{N: 3, Keys: [workload.YCSBTMaxKeys]uint64{1, 2, 7}}
	for range 2 {
		if _, err := y.Exec(ctx, db, op); err != nil {
			t.Fatal(err)
		}
	}
	for n, want := range map[uint64]uint64{0: 0, 1: 2, 2: 2, 7: 2, 9: 0} {
		if got := counter(t, db, n); got != want {
			t.Errorf("record %d counts %d, want %d", n, got, want)
		}
	}
	if v := get(t, db, workload.YCSBTKey(7)); len(v) != 100 {
		t.Errorf("a %d-byte value, want 100", len(v))
	}
	for _, bad := range []*workload.YCSBT{{Zipf: 1}, {Zipf: -0.5}, {ValueSize: txn.MaxValue + 1}, {MinKeys: 5, MaxKeys: 2}, {MaxKeys: 17}} {
		if bad.Validate() == nil || bad.Load(ctx, db, workload.TxnLoad{}) == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, err := bad.Exec(ctx, db, op); err == nil {
			t.Errorf("%+v ran", bad)
		}
	}
	if _, err := y.Exec(ctx, db, workload.YCSBTOp{}); err == nil {
		t.Error("a transaction of no keys ran")
	}
	var tl *workload.CorruptError
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(workload.YCSBTKey(3), []byte("short")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Exec(ctx, db, workload.YCSBTOp{N: 1, Keys: [workload.YCSBTMaxKeys]uint64{3}}); !errors.As(err, &tl) || !errors.Is(err, workload.ErrCorrupt) {
		t.Errorf("a 5-byte record: %v, want a CorruptError", err)
	}
}
