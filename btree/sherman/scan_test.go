package sherman_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	gbtree "github.com/google/btree"
	"github.com/rdmakit/rdmakit/btree/sherman"
)

// TestScanOracle scans while writers split leaves: keys "s…" are put
// before the scans and only updated during them (present for every
// scan: the oracle, a google/btree), keys "v…" come and go. Every scan
// must return each oracle key in its range once, in order, nothing
// outside the range, nothing that was never written.
func TestScanOracle(t *testing.T) { scanOracle(t, sherman.Config{Layout: small}) }

// scanOracle is TestScanOracle's run on clients of configuration cfg.
func scanOracle(t *testing.T, cfg sherman.Config) {
	ctx := context.Background()
	b := newBed(t, 1, 16<<20)
	w := b.client(t, cfg)
	oracle := gbtree.NewG(8, func(a, b string) bool { return a < b })
	for i := 0; i < 400; i += 2 {
		k := fmt.Sprintf("k%04d", i)
		if err := w.Put(ctx, []byte(k), []byte("s")); err != nil {
			t.Fatal(err)
		}
		oracle.ReplaceOrInsert(k)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for id := range 4 {
		c := b.client(t, cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), 1))
			for !stop.Load() {
				i := r.IntN(400)
				k := []byte(fmt.Sprintf("k%04d", i))
				var err error
				switch {
				case i%2 == 0:
					err = c.Put(ctx, k, []byte("s"))
				case r.IntN(3) == 0:
					err = c.Delete(ctx, k)
				default:
					err = c.Put(ctx, k, []byte("v"))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	scans := 300
	if long() {
		scans = 5000
	}
	r := rand.New(rand.NewPCG(9, 9))
	sc := b.client(t, cfg)
	for range scans {
		lo, hi := r.IntN(420), r.IntN(420)
		from, to := []byte(fmt.Sprintf("k%04d", min(lo, hi))), []byte(fmt.Sprintf("k%04d", max(lo, hi)))
		if r.IntN(5) == 0 {
			from = nil
		}
		if r.IntN(5) == 0 {
			to = nil
		}
		limit := 0
		if r.IntN(3) == 0 {
			limit = 1 + r.IntN(30)
		}
		var got [][]byte
		it := sc.Scan(ctx, from, to, limit)
		for it.Next() {
			k := bytes.Clone(it.Key())
			if len(got) > 0 && bytes.Compare(got[len(got)-1], k) >= 0 {
				t.Fatalf("scan [%s,%s): %s after %s", from, to, k, got[len(got)-1])
			}
			if from != nil && bytes.Compare(k, from) < 0 || to != nil && bytes.Compare(k, to) >= 0 {
				t.Fatalf("scan [%s,%s): %s outside", from, to, k)
			}
			if v := string(it.Value()); v != "s" && v != "v" {
				t.Fatalf("scan: %s=%q never written", k, v)
			}
			got = append(got, k)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(got) > limit {
			t.Fatalf("limit %d: %d keys", limit, len(got))
		}
		// Every oracle key in range (up to the last returned when the
		// limit cut the scan) must be there.
		var want []string
		visit := func(k string) bool {
			if to != nil && k >= string(to) || limit > 0 && len(got) == limit && k > string(got[len(got)-1]) {
				return false
			}
			want = append(want, k)
			return true
		}
		if from == nil {
			oracle.Ascend(visit)
		} else {
			oracle.AscendGreaterOrEqual(string(from), visit)
		}
		j := 0
		for _, k := range want {
			for j < len(got) && string(got[j]) < k {
				j++
			}
			if j == len(got) || string(got[j]) != k {
				t.Fatalf("scan [%s,%s) limit %d: %s missing (got %d keys)", from, to, limit, k, len(got))
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if st := w.Stats(); st.Splits == 0 {
		t.Log("the loader split nothing?")
	}
}

// TestSplitStorm: many clients insert ascending keys at once (every
// insert lands in the rightmost leaf, which splits again and again, up
// to new roots); afterwards every key is there and a scan returns them
// all in order.
func TestSplitStorm(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 32<<20)
	cfg := sherman.Config{Layout: small}
	const clients, per = 8, 250
	n := per
	if long() {
		n = 2500
	}
	var wg sync.WaitGroup
	var splits atomic.Uint64
	for id := range clients {
		c := b.client(t, cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				k := fmt.Sprintf("k%06d-%d", i, id)
				if err := c.Put(ctx, []byte(k), []byte(k[:6])); err != nil {
					t.Error(err)
					return
				}
			}
			splits.Add(c.Stats().Splits)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	c := b.client(t, cfg)
	for id := range clients {
		for i := range n {
			k := fmt.Sprintf("k%06d-%d", i, id)
			if v, err := c.Get(ctx, []byte(k), nil); err != nil || string(v) != k[:6] {
				t.Fatalf("lost %s: %q %v", k, v, err)
			}
		}
	}
	it := c.Scan(ctx, nil, nil, 0)
	var prev []byte
	count := 0
	for it.Next() {
		if prev != nil && bytes.Compare(prev, it.Key()) >= 0 {
			t.Fatalf("%s after %s", it.Key(), prev)
		}
		prev = bytes.Clone(it.Key())
		count++
	}
	if it.Err() != nil || count != clients*n {
		t.Fatalf("scan: %d keys of %d: %v", count, clients*n, it.Err())
	}
	if splits.Load() < uint64(clients*n/4) {
		t.Fatalf("only %d splits", splits.Load())
	}
	t.Logf("%d splits", splits.Load())
}
