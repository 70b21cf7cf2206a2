package sherman_test

import (
	"context"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/btree/sherman"
)

// BenchmarkGetTCP is the point read over tcp (the memory node in its own
// process) with 32 goroutines on one client, as the btree-ycsb
// experiment runs it: Sherman (32 slots) and Smart-BT (2 workers × 16
// tasks) on YCSB-C (zipfian s = 1.0001 — math/rand wants s > 1 — over 10,000 preloaded keys, warm
// caches). It reports operations per second, round trips and bytes
// read per operation; -benchmem's allocs/op are the whole Get's.
func BenchmarkGetTCP(b *testing.B) {
	const keys, tasks = 10000, 32
	for _, sys := range []struct {
		name  string
		smart bool
	}{{"sherman", false}, {"smart-bt", true}} {
		b.Run(sys.name, func(b *testing.B) {
			bd := tcpNode(b)
			cfg := sherman.Config{Slots: tasks}
			loader := bd.client(b, cfg)
			ctx := context.Background()
			for i := range keys {
				if err := loader.Put(ctx, benchKey(i), []byte("value-0")); err != nil {
					b.Fatal(err)
				}
			}
			if sys.smart {
				cfg.Smart = &sherman.SmartConfig{Workers: 2, Tasks: tasks / 2, Techniques: sherman.AllTechniques}
			}
			c := bd.client(b, cfg)
			for i := range keys {
				if _, err := c.Get(ctx, benchKey(i), nil); err != nil {
					b.Fatal(err)
				}
			}
			s0 := c.Stats()
			seed := maphash.MakeSeed()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for g := range tasks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 7))
					z := rand.NewZipf(r, 1.0001, 1, keys-1)
					var buf []byte
					for next.Add(1) <= int64(b.N) {
						var err error
						buf, err = c.Get(ctx, benchKey(int(maphash.Comparable(seed, z.Uint64())%keys)), buf[:0])
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
			if s1.SpecHits+s1.SpecMisses > s0.SpecHits+s0.SpecMisses {
				b.ReportMetric(float64(s1.SpecHits-s0.SpecHits)/n, "spechit/op")
			}
		})
	}
}
