package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	Register(Experiment{
		Name: "kv-demo",
		Description: "the demo: an embedded node (loop fabric), 100,000 keys loaded into each of the four stores, " +
			"YCSB-A (zipfian) and YCSB-C (uniform) for a few seconds each",
		Run: runKVDemo,
	})
}

var kvDemoColumns = []Column{
	{Name: "store"}, {Name: "workload"}, {Name: "rate", Unit: "ops/s"}, {Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "round_trips"}, {Name: "node_cpu", Unit: "µs/op"},
}

var demoSeq atomic.Int64

// KVDemoRecords is how many keys kv-demo loads into each store (the
// demo's --keys); Quick runs load 5,000.
var KVDemoRecords int64 = 100000

func runKVDemo(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(2*time.Second, 300*time.Millisecond)
	records := KVDemoRecords
	if env.Quick {
		records = 5000
	}
	const value, tasks = 64, 8
	r := &Result{Name: "kv-demo", Title: "four key-value stores on an embedded node", Columns: kvDemoColumns,
		Plots: []Plot{{Title: "throughput and median latency (one line per store: YCSB-A, YCSB-C)", X: "p50", Y: "rate", Series: []string{"store"}}}}
	steps := len(KVDesigns) * 3
	bar := env.Progress(steps, time.Duration(len(KVDesigns))*(2*point+2*time.Second), "kv demo")
	defer bar.Finish()
	for _, d := range KVDesigns {
		n, err := NewKVNode(d, fmt.Sprintf("loop://kv-demo-%d/", demoSeq.Add(1)), records, value)
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer n.Close()
			dbs, cs, err := n.DBs(ctx, 4)
			if err != nil {
				return err
			}
			load := workload.YCSB{Workload: "a", Records: records, ValueSize: value}
			if _, err := load.Load(ctx, dbs); err != nil {
				return fmt.Errorf("%s: %w", d, err)
			}
			bar.Add(1)
			for _, w := range []struct{ letter, dist, name string }{{"a", "zipfian", "A zipfian"}, {"c", "uniform", "C uniform"}} {
				y := workload.YCSB{Workload: w.letter, Distribution: w.dist, Records: records, ValueSize: value, Threads: tasks, Duration: point}
				wl, err := y.Load(ctx, nil)
				if err != nil {
					return err
				}
				t0, c0 := trips(cs), n.CPU()
				res, err := y.Run(ctx, wl, dbs)
				if err != nil {
					return fmt.Errorf("%s, YCSB-%s: %w", d, w.letter, err)
				}
				ops := float64(max(res.Ops, 1))
				r.AddRow(d, w.name, res.Rate(), us(res.P50), us(res.P99), float64(trips(cs)-t0)/ops, us(n.CPU()-c0)/ops)
				bar.Add(1)
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	r.Meta.Transport = "loop (embedded node)"
	r.Notes = append(r.Notes,
		fmt.Sprintf("Each store: a node on a loop fabric in this process, %d keys of %d bytes loaded through go-ycsb v1.0.1, then YCSB-A (50%% reads, 50%% updates, scrambled zipfian 0.99) and YCSB-C (reads, uniform) from %d goroutines over 4 connections, %v each.", records, value, tasks, point),
		"rate: operations per second. p50, p99: latency of one operation. round_trips: request lists and RPCs per operation (Pilaf: GET 2 READs, PUT 1 RPC; PRISM-KV: GET 1 indirect READ, PUT 1 chain; RACE: GET 2 (buckets, block), PUT 3; Smart-HT: 1 when its slot cache hits).",
		"node_cpu: time the node's own threads spent per operation (Pilaf's PUT handlers; PRISM-KV's restocking; RACE's memory hand-outs). One-sided operations cost the node's CPU nothing: its NIC executes them (on loop, the requester's goroutine plays the NIC).",
	)
	return r, nil
}
