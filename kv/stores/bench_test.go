package stores_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/shm"
)

// BenchmarkStore measures GET and PUT of every design on loop: one
// caller at a time and several sharing the client.
func BenchmarkStore(b *testing.B) {
	for _, design := range stores.Designs {
		b.Run(design, func(b *testing.B) {
			c := benchClient(b, design)
			ctx := context.Background()
			keys := make([][]byte, 256)
			val := make([]byte, 64)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("key-%04d", i))
				if err := c.Put(ctx, keys[i], val); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("get", func(b *testing.B) {
				buf := make([]byte, 0, 128)
				for i := 0; i < b.N; i++ {
					if _, err := c.Get(ctx, keys[i%len(keys)], buf); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("put", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := c.Put(ctx, keys[i%len(keys)], val); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("get-parallel", func(b *testing.B) {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, 0, 128)
					for i := 0; pb.Next(); i++ {
						if _, err := c.Get(ctx, keys[i%len(keys)], buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkGetTasks measures GETs of PRISM-KV and Smart-HT from 8 and 32
// goroutines sharing one client, on shm (KVBENCH_SCHEME overrides), and
// reports the process's CPU time per GET (cpu-ns/op): over shm the
// client's CPU is what bounds a GET's throughput. …/slot-qps gives each
// slot its own QP and CQ (kv-peers' shm rows; Smart-HT without its
// runtime then).
func BenchmarkGetTasks(b *testing.B) {
	scheme := os.Getenv("KVBENCH_SCHEME")
	if scheme == "" {
		scheme = "shm"
	}
	for _, design := range []string{"prism-kv", "prism-kv/slot-qps", "smart-ht", "smart-ht/slot-qps"} {
		b.Run(design, func(b *testing.B) {
			c := benchClientOn(b, scheme, design, 64) // as kv-peers runs them
			ctx := context.Background()
			keys := make([][]byte, 1024)
			val := make([]byte, 64)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("key-%04d", i))
				if err := c.Put(ctx, keys[i], val); err != nil {
					b.Fatal(err)
				}
			}
			for _, tasks := range []int{8, 32} {
				b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
					b.SetParallelism(max(1, tasks/runtime.GOMAXPROCS(0)))
					b.ReportAllocs()
					before := cpuTime()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						buf := make([]byte, 0, 128)
						for i := rand.IntN(len(keys)); pb.Next(); i++ {
							if _, err := c.Get(ctx, keys[i%len(keys)], buf); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.StopTimer()
					b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchClient starts a node of design on a loop bed and returns a client
// to it (Smart-HT's on a two-worker smart runtime).
func benchClient(b testing.TB, design string) stores.Client {
	return benchClientOn(b, "loop", design, 0)
}

// benchClientOn is benchClient on a bed of scheme; slots > 0 runs that
// many operations in flight at once, polling and with Smart-HT's runtime
// as kv-peers does. Designs …/slot-qps have a connection per slot
// (ClientOptions.SlotConnect; Smart-HT without its runtime).
func benchClientOn(b testing.TB, scheme, design string, slots int) stores.Client {
	bed := kvtest.NewBed(b, scheme)
	var o stores.ClientOptions
	if d, ok := strings.CutSuffix(design, "/slot-qps"); ok {
		design, o.SlotConnect = d, bed.SlotConnect(b)
	}
	srv, err := stores.NewServer(design, bed.NodePD, 4096, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	o.Slots = slots
	if slots > 0 {
		o.Poll = verbs.PollEvent // as kv-peers' clients poll
	}
	if design == "smart-ht" && o.SlotConnect != nil {
		o.Cache = race.NewSlotCache(0)
	}
	if design == "smart-ht" && o.SlotConnect == nil {
		ncq, err := bed.Node.CreateCQ(1024)
		if err != nil {
			b.Fatal(err)
		}
		connect := func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
			qp, err := bed.PD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 512}})
			if err != nil {
				return nil, err
			}
			nqp, err := bed.NodePD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ncq, RecvCQ: ncq})
			if err != nil {
				return nil, err
			}
			if err := verbs.ConnectRC(nqp, verbs.AccessAll, bed.Dev.Address(), qp.QPN()); err != nil {
				return nil, err
			}
			return qp, verbs.ConnectRC(qp, verbs.AccessAll, bed.Node.Address(), nqp.QPN())
		}
		rt, err := smart.New(context.Background(), smart.Config{Device: bed.Dev, PD: bed.PD, Nodes: []smart.ConnectFunc{connect},
			Workers: 2, Throttle: true, Tuner: smart.TunerConfig{Candidates: []int{16, 64}, Delta: time.Millisecond},
			Backoff: smart.BackoffConfig{Tasks: 4096}, Gather: true})
		if slots > 0 { // kv-peers' runtime
			rt.Close()
			rt, err = stores.NewRuntime(context.Background(), bed.Dev, bed.PD, connect, 0)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(rt.Close)
		o.Runtime, o.Cache = rt, race.NewSlotCache(0)
	}
	cs := kvtest.Clients(b, bed, 1, stores.QPCap.MaxSendWR, stores.QPCap.MaxRecvWR, srv,
		func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (stores.Client, error) {
			return stores.NewClient(ctx, design, pd, qp, cq, o)
		})
	return cs[0]
}
