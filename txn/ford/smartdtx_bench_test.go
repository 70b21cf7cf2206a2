package ford_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// benchLayout is the benchmarks' layout.
var benchLayout = ford.Layout{Buckets: 4096, ValueSize: 64, Coordinators: 64, LogSize: 4 << 10}

// BenchmarkSmartDTX runs SmallBank (1,000 customers, 90% of the
// transactions on 40 hot ones) over three memory nodes — on the loop
// transport, and on tcp (loopback sockets) — with GOMAXPROCS workers ×
// tasks goroutines, on FORD (one QP per node shared by every
// transaction), FORD+ (Smart-DTX with no technique: per-worker QPs and
// CQs) and Smart-DTX (every technique), at several tasks per worker. It
// reports transactions per second, the median latency and the aborts
// per commit.
func BenchmarkSmartDTX(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	for _, transport := range []string{"loop", "tcp"} {
		for _, tasks := range []int{1, 4, 8} {
			for _, sys := range []struct {
				name  string
				smart *ford.SmartConfig
			}{
				{"FORD", nil},
				{"FORD+", &ford.SmartConfig{Workers: workers, Tasks: tasks}},
				{"Smart-DTX", &ford.SmartConfig{Workers: workers, Tasks: tasks, Techniques: ford.AllTechniques}},
			} {
				b.Run(fmt.Sprintf("%s/%s/tasks=%d", transport, sys.name, tasks), func(b *testing.B) {
					benchSmallBank(b, transport, sys.smart, workers*tasks)
				})
			}
		}
	}
}

// benchDB starts three memory nodes on transport (loop or tcp) and dials
// a client with Smart-DTX configuration sc (nil: FORD).
func benchDB(b *testing.B, transport string, sc *ford.SmartConfig) *ford.DB {
	if transport == "loop" {
		bd := newBed(b, 3, benchLayout)
		bd.smart = sc
		return bd.db()
	}
	var nodes []string
	for range 3 {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			Memory: benchLayout.NodeBytes(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Close() })
		nodes = append(nodes, srv.Info().CM)
	}
	bd := &bed{t: b, addrs: nodes, layout: benchLayout}
	return bd.dbWith(ford.Config{Device: "tcp://127.0.0.1:0", Nodes: nodes, Layout: benchLayout, Smart: sc})
}

// benchSmallBank runs b.N SmallBank transactions from g goroutines.
func benchSmallBank(b *testing.B, transport string, sc *ford.SmartConfig, g int) {
	db := benchDB(b, transport, sc)
	ctx := tctx(b)
	sb := &workload.SmallBank{Accounts: 1000, HotAccounts: 40}
	if err := sb.Load(ctx, db, workload.TxnLoad{}); err != nil {
		b.Fatal(err)
	}
	before := db.Stats()
	var next atomic.Int64
	lat := make([][]time.Duration, g)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range g {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(i) + 11))
			for next.Add(1) <= int64(b.N) {
				op := sb.Next(r)
				t0 := time.Now()
				if _, err := sb.Exec(context.Background(), db, op); err != nil && !errors.Is(err, workload.ErrRejected) {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	st := db.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "txn/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	}
	commits := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(st.LockAborts+st.ValidationAborts-before.LockAborts-before.ValidationAborts)/commits, "aborts/commit")
}
