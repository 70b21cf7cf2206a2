package sherman_test

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/btree/sherman"
)

// BenchmarkSmartBT compares Sherman, Sherman+ (no technique), speculative
// lookup alone (and each other technique alone) and Smart-BT (every technique) on a loop fabric, at 2 and
// 8 tasks per worker (2 workers; Sherman gets as many slots and
// goroutines), on YCSB-C-like (read-only) and YCSB-B-like (95% reads, 5%
// updates) loads over 10,000 preloaded keys drawn zipfian (s = 1.01,
// scrambled). It reports operations per second, round trips and bytes
// read per operation (and, with throttling, the workers' mean
// work-request limit at the end).
func BenchmarkSmartBT(b *testing.B) {
	const keys = 10000
	for _, load := range []struct {
		name   string
		update int // percent
	}{{"C", 0}, {"B", 5}} {
		for _, sys := range []struct {
			name string
			tech sherman.Technique
			on   bool
		}{{"sherman", 0, false}, {"sherman+", 0, true}, {"spec", sherman.SpecLookup, true},
			{"throttling", sherman.Throttling, true}, {"backoff", sherman.Backoff, true}, {"coroutine", sherman.CoroutineThrottle, true}, {"smart-bt", sherman.AllTechniques, true}} {
			for _, tasks := range []int{2, 8} {
				b.Run(fmt.Sprintf("%s/%s/tasks=%d", load.name, sys.name, tasks), func(b *testing.B) {
					const workers = 2
					bd := newBed(b, 1, 64<<20)
					cfg := sherman.Config{Slots: workers * tasks}
					loader := bd.client(b, cfg)
					ctx := context.Background()
					for i := range keys {
						if err := loader.Put(ctx, benchKey(i), []byte("value-0")); err != nil {
							b.Fatal(err)
						}
					}
					if sys.on {
						cfg.Smart = &sherman.SmartConfig{Workers: workers, Tasks: tasks, Techniques: sys.tech}
					}
					c := bd.client(b, cfg)
					for i := range keys { // warm caches, as a long run would
						if _, err := c.Get(ctx, benchKey(i), nil); err != nil {
							b.Fatal(err)
						}
					}
					s0 := c.Stats()
					var next atomic.Int64
					var wg sync.WaitGroup
					seed := maphash.MakeSeed()
					b.ResetTimer()
					for g := range workers * tasks {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r := rand.New(rand.NewPCG(uint64(g), 3))
							z := rand.NewZipf(r, 1.01, 1, keys-1)
							var buf []byte
							for next.Add(1) <= int64(b.N) {
								k := benchKey(int(maphash.Comparable(seed, z.Uint64()) % keys))
								var err error
								if r.IntN(100) < load.update {
									err = c.Put(ctx, k, []byte("value-1"))
								} else {
									buf, err = c.Get(ctx, k, buf[:0])
								}
								if err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					s1 := c.Stats()
					n := float64(b.N)
					b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
					b.ReportMetric(float64(s1.RoundTrips-s0.RoundTrips)/n, "trips/op")
					b.ReportMetric(float64(s1.BytesRead-s0.BytesRead)/n, "Bread/op")
					if ws := c.SmartStats(); len(ws) > 0 && sys.tech&sherman.Throttling != 0 {
						limit := 0
						for _, w := range ws {
							limit += w.Limit
						}
						b.ReportMetric(float64(limit)/float64(len(ws)), "wr-limit")
					}
				})
			}
		}
	}
}

// benchKey is the i-th key of the benchmark.
func benchKey(i int) []byte { return fmt.Appendf(nil, "user%010d", i) }
