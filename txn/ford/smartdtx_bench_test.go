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
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// benchLayout is the benchmarks' layout.
var benchLayout = ford.Layout{Buckets: 16384, ValueSize: 64, Coordinators: 64, LogSize: 4 << 10}

// BenchmarkSmartDTX runs SmallBank (1,000 customers, 90% of the
// transactions on 40 hot ones) over three memory nodes — on the loop
// transport, and on tcp (loopback sockets) — with GOMAXPROCS workers ×
// tasks goroutines, on FORD (one QP per node shared by every
// transaction), FORD+ (Smart-DTX with no technique: per-worker QPs and
// CQs), Smart-DTX (every technique) and each technique alone, at
// several tasks per worker. It
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
				{"throttling", &ford.SmartConfig{Workers: workers, Tasks: tasks, Techniques: ford.Throttling}},
				{"backoff", &ford.SmartConfig{Workers: workers, Tasks: tasks, Techniques: ford.Backoff}},
				{"coroutine-throttle", &ford.SmartConfig{Workers: workers, Tasks: tasks, Techniques: ford.CoroutineThrottle}},
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

// BenchmarkSmartDTXTATP runs TATP (1,000 subscribers) over three memory
// nodes — on the loop transport and on tcp — with GOMAXPROCS workers × 8
// tasks goroutines on FORD, FORD+ and Smart-DTX: with no contention to
// avoid, the runtime's own cost shows (FORD+ against FORD).
func BenchmarkSmartDTXTATP(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	const tasks = 8
	for _, transport := range []string{"loop", "tcp"} {
		for _, sys := range []struct {
			name  string
			smart *ford.SmartConfig
		}{
			{"FORD", nil},
			{"FORD+", &ford.SmartConfig{Workers: workers, Tasks: tasks}},
			{"Smart-DTX", &ford.SmartConfig{Workers: workers, Tasks: tasks, Techniques: ford.AllTechniques}},
		} {
			b.Run(fmt.Sprintf("%s/%s/tasks=%d", transport, sys.name, tasks), func(b *testing.B) {
				db := benchDB(b, transport, sys.smart)
				tp := &workload.TATP{Subscribers: 1000}
				if err := tp.Load(tctx(b), db, workload.TxnLoad{}); err != nil {
					b.Fatal(err)
				}
				benchRun(b, db, workers*tasks, func(r *rand.Rand) error {
					_, err := tp.Exec(context.Background(), db, tp.Next(r))
					return err
				})
			})
		}
	}
}

// benchSmallBank runs b.N SmallBank transactions from g goroutines.
func benchSmallBank(b *testing.B, transport string, sc *ford.SmartConfig, g int) {
	db := benchDB(b, transport, sc)
	sb := &workload.SmallBank{Accounts: 1000, HotAccounts: 40}
	if err := sb.Load(tctx(b), db, workload.TxnLoad{}); err != nil {
		b.Fatal(err)
	}
	benchRun(b, db, g, func(r *rand.Rand) error {
		_, err := sb.Exec(context.Background(), db, sb.Next(r))
		return err
	})
}

// benchRun runs b.N transactions (one call of tx each; a rejection is
// the workload's business, not an error) from g goroutines and reports
// transactions per second, the median latency, the aborts per commit
// (lock conflicts and failed validations), the round trips per commit,
// the workers' mean limit, n_max and backoff base (Smart-DTX)
// and the process's CPU time per transaction (the memory nodes' too when
// they run in the process): on a shared machine the CPU a transaction
// costs is steadier than the rate.
func benchRun(b *testing.B, db *ford.DB, g int, tx func(r *rand.Rand) error) {
	before := db.Stats()
	var next atomic.Int64
	lat := make([][]time.Duration, g)
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := range g {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(i) + 11))
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := tx(r); err != nil && !errors.Is(err, workload.ErrRejected) {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	st := db.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "txn/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/txn")
	if ws := db.SmartStats(); len(ws) > 0 {
		var limit, tasks, c0 float64
		for _, w := range ws {
			limit += float64(w.Limit) / float64(len(ws))
			tasks += float64(w.Tasks) / float64(len(ws))
			c0 += float64(w.BackoffC0.Microseconds()) / float64(len(ws))
		}
		b.ReportMetric(limit, "limit")
		b.ReportMetric(tasks, "n_max")
		b.ReportMetric(c0, "C0-µs")
	}
	commits := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(st.LockAborts-before.LockAborts)/commits, "lock-aborts/commit")
	b.ReportMetric(float64(st.ValidationAborts-before.ValidationAborts)/commits, "valid-aborts/commit")
	b.ReportMetric(float64(st.Rounds-before.Rounds)/commits, "trips/commit")
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
