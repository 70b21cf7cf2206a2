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

// tcpTasks is the goroutines of the tcp benchmarks, tcpKeys their
// preloaded keys.
const tcpTasks, tcpKeys = 32, 10000

// tcpBenchClient starts a memory node process, loads tcpKeys keys and
// returns a client of it over tcp with a warm cache: Sherman (tcpTasks
// slots) or Smart-BT (2 workers × tcpTasks/2 tasks).
func tcpBenchClient(b *testing.B, smart bool) *sherman.Client {
	bd := tcpNode(b)
	cfg := sherman.Config{Slots: tcpTasks}
	loader := bd.client(b, cfg)
	ctx := context.Background()
	for i := range tcpKeys {
		if err := loader.Put(ctx, benchKey(i), []byte("value-0")); err != nil {
			b.Fatal(err)
		}
	}
	if smart {
		cfg.Smart = &sherman.SmartConfig{Workers: 2, Tasks: tcpTasks / 2, Techniques: sherman.AllTechniques}
	}
	c := bd.client(b, cfg)
	for i := range tcpKeys {
		if _, err := c.Get(ctx, benchKey(i), nil); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// runTCP runs b.N operations over tcpTasks goroutines, each with its
// own random source and its own op from newOp, and reports operations per second, round trips and
// bytes read per operation.
func runTCP(b *testing.B, c *sherman.Client, newOp func() func(r *rand.Rand, z *rand.Zipf) error) {
	s0 := c.Stats()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for g := range tcpTasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			z := rand.NewZipf(r, 1.0001, 1, tcpKeys-1)
			op := newOp()
			for next.Add(1) <= int64(b.N) {
				if err := op(r, z); err != nil {
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
}

// BenchmarkScanTCP is YCSB-E's scan over tcp with tcpTasks goroutines
// on one client: from a zipfian start key (s = 1.0001), 1 to 100 keys
// (uniform).
func BenchmarkScanTCP(b *testing.B) {
	for _, sys := range []struct {
		name  string
		smart bool
	}{{"sherman", false}, {"smart-bt", true}} {
		b.Run(sys.name, func(b *testing.B) {
			c := tcpBenchClient(b, sys.smart)
			seed := maphash.MakeSeed()
			ctx := context.Background()
			runTCP(b, c, func() func(r *rand.Rand, z *rand.Zipf) error {
				return func(r *rand.Rand, z *rand.Zipf) error {
					it := c.Scan(ctx, benchKey(int(maphash.Comparable(seed, z.Uint64())%tcpKeys)), nil, 1+r.IntN(100))
					for it.Next() {
					}
					return it.Err()
				}
			})
		})
	}
}

// BenchmarkGetTCP is the point read over tcp (the memory node in its own
// process) with tcpTasks goroutines on one client, as the btree-ycsb
// experiment runs it: Sherman and Smart-BT on YCSB-C (zipfian start
// keys, s = 1.0001 — math/rand wants s > 1 — warm caches). allocs/op
// counts the benchmark's key too (one).
func BenchmarkGetTCP(b *testing.B) {
	for _, sys := range []struct {
		name  string
		smart bool
	}{{"sherman", false}, {"smart-bt", true}} {
		b.Run(sys.name, func(b *testing.B) {
			c := tcpBenchClient(b, sys.smart)
			seed := maphash.MakeSeed()
			ctx := context.Background()
			runTCP(b, c, func() func(r *rand.Rand, z *rand.Zipf) error {
				var buf []byte
				return func(_ *rand.Rand, z *rand.Zipf) error {
					var err error
					buf, err = c.Get(ctx, benchKey(int(maphash.Comparable(seed, z.Uint64())%tcpKeys)), buf[:0])
					return err
				}
			})
		})
	}
}
