package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	Register(Experiment{
		Name: "kv-ycsb",
		Description: "the four key-value stores over tcp under go-ycsb: YCSB-C (uniform) and YCSB-A (zipfian 0.99), " +
			"throughput, median and p99 latency, round trips per operation; RACE vs Smart-HT on YCSB-A against the task count",
		Run: runKVYCSB,
	})
}

var kvColumns = []Column{
	{Name: "store"}, {Name: "workload"}, {Name: "value", Unit: "B"}, {Name: "tasks"}, {Name: "connections"}, {Name: "rate", Unit: "Mops"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"}, {Name: "round_trips"},
}

// kvNodeURI is the tcp device of the KV experiments' nodes (and their
// clients). Its soft NIC parks on the socket as soon as a connection has
// nothing to read (spin=0) instead of polling it for 50 µs: the node
// shares this machine's two cores with the client tasks, and a spinning
// NIC goroutine takes the core the tasks need (YCSB-C at 8 tasks,
// PRISM-KV: 0.147 Mops parked vs 0.105 Mops spinning, medians of 5).
const kvNodeURI = "tcp://127.0.0.1:0?spin=0s"

// kvLatencyURI is the tcp device of the node that measures unloaded
// latency (one task): its soft NIC spins 50 µs after each request (the
// default), as a latency-sensitive deployment's would, and answers the
// next one without a wake-up.
const kvLatencyURI = "tcp://127.0.0.1:0"

// kvRun is one workload run: tasks goroutines over conns client
// connections (0: kvConns, at most tasks).
type kvRun struct {
	y       workload.YCSB
	tasks   int
	conns   int
	latency bool // one task on a client of its own that spins before parking (kvLatencyPoll)
}

func (r kvRun) connections() int {
	if r.conns > 0 {
		return min(r.conns, r.tasks)
	}
	return min(kvConns, r.tasks)
}

// kvSizes are the record count and value size of a run.
func kvSizes(env *Env) (int64, int) {
	if env.Quick {
		return 2000, 64
	}
	return 20000, 64
}

func measureKV(ctx context.Context, design, uri string, records int64, value int, runs []kvRun, row func(kvRun, workload.Result, float64)) error {
	n, err := NewKVNode(design, uri, records, value)
	if err != nil {
		return err
	}
	defer n.Close()
	conns := 1
	for _, r := range runs {
		conns = max(conns, r.connections())
	}
	dbs, cs, err := n.DBs(ctx, conns)
	if err != nil {
		return err
	}
	// Load through the first connection (8 goroutines), so that a
	// one-connection run finds its client's caches warm.
	loaders := make([]ycsb.DB, 8)
	for i := range loaders {
		loaders[i] = dbs[0]
	}
	load := workload.YCSB{Workload: "a", Records: records, ValueSize: value}
	if _, err := load.Load(ctx, loaders); err != nil {
		return fmt.Errorf("%s: %w", design, err)
	}
	for _, r := range runs {
		y := r.y
		y.Records, y.ValueSize, y.Threads = records, value, r.tasks
		wl, err := y.Load(ctx, nil) // the workload only: records are in
		if err != nil {
			return err
		}
		use := dbs[:r.connections()]
		if r.latency {
			c, err := n.ClientPolling(ctx, kvLatencyPoll)
			if err != nil {
				return err
			}
			use = []ycsb.DB{workload.DB{Store: c}}
			cs = append(cs, c)
		}
		t0 := trips(cs)
		res, err := y.Run(ctx, wl, use)
		if err != nil {
			return fmt.Errorf("%s, YCSB-%s: %w", design, y.Workload, err)
		}
		row(r, res, float64(trips(cs)-t0)/float64(max(res.Ops, 1)))
	}
	return nil
}

// fig7Workers is the connections of the RACE vs Smart-HT sweep: Smart's
// worker threads, one per core, each with its own QP (thread-aware
// resource allocation), the tasks spread over them as coroutines. More
// workers than cores only oversubscribes them (measured at 32 tasks on 2
// cores: Smart-HT 0.148 and 0.157 Mops over 2 workers, 0.140 and 0.128
// over 8).
var fig7Workers = max(runtime.GOMAXPROCS(0), 1)

// kvConns is the client connections of a KV run: one, shared by all its
// tasks, as an RDMA application shares a QP among its coroutines (their
// concurrent requests then share doorbells and frames).
var kvConns = 1

func runKVYCSB(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(time.Second, 200*time.Millisecond)
	records, value := kvSizes(env)
	r := &Result{Name: "kv-ycsb", Title: "key-value stores under YCSB over tcp", Columns: kvColumns,
		Plots: []Plot{{Title: "YCSB-A (zipfian) throughput against tasks", X: "tasks", Y: "rate", Series: []string{"store"},
			Where: map[string]string{"workload": "A zipfian"}}}}
	c := workload.YCSB{Workload: "c", Distribution: "uniform", Duration: point}
	a := workload.YCSB{Workload: "a", Distribution: "zipfian", Duration: point}
	taskCounts := []int{1, 4, 16, 32}
	bar := env.Progress(len(KVDesigns)*3+2*len(taskCounts)+4, time.Duration(len(KVDesigns)*3+12)*point, "kv-ycsb")
	defer bar.Finish()
	getP50 := map[string]float64{}
	fig7 := map[string]float64{}
	for _, d := range KVDesigns {
		row := func(run kvRun, res workload.Result, rtt float64) {
			name := "C uniform"
			if run.y.Workload == "a" {
				name = "A zipfian"
			}
			r.AddRow(d, name, value, run.tasks, run.connections(), res.Rate()/1e6, us(res.P50), us(res.P99), rtt)
			if run.latency {
				getP50[d] = us(res.P50) // unloaded: one GET at a time
			}
			if run.y.Workload == "a" && run.tasks == taskCounts[len(taskCounts)-1] {
				fig7[d] = res.Rate()
			}
			bar.Add(1)
		}
		// Unloaded latency on a node whose NIC spins (the latency
		// configuration); the loaded runs on one that parks.
		err := measureKV(ctx, d, kvLatencyURI, records, value, []kvRun{{c, 1, 1, true}}, row)
		if err != nil {
			return nil, err
		}
		err = measureKV(ctx, d, kvNodeURI, records, value, []kvRun{{c, 8, 0, false}, {a, 8, 0, false}}, row)
		if err != nil {
			return nil, err
		}
		if d == "race" || d == "smart-ht" {
			var runs []kvRun
			for _, t := range taskCounts {
				runs = append(runs, kvRun{a, t, fig7Workers, false})
			}
			err = measureKV(ctx, d, kvNodeURI, records, value, runs, row)
		}
		if err != nil {
			return nil, err
		}
	}
	// Value sizes: YCSB-C at 8 tasks with 8 B and 512 B values.
	for _, d := range []string{"pilaf", "prism-kv"} {
		for _, v := range []int{8, 512} {
			err := measureKV(ctx, d, kvNodeURI, records, v, []kvRun{{c, 8, 0, false}}, func(run kvRun, res workload.Result, rtt float64) {
				r.AddRow(d, "C uniform", v, run.tasks, run.connections(), res.Rate()/1e6, us(res.P50), us(res.P99), rtt)
			})
			if err != nil {
				return nil, err
			}
			bar.Add(1)
		}
	}
	r.Meta.Transport = "tcp"
	r.Notes = append(r.Notes,
		fmt.Sprintf("%d records of %d-byte values (and 8 B and 512 B in the last rows), loaded through go-ycsb v1.0.1's core workload, which also generates the operations (YCSB-C: 100%% reads, uniform keys; YCSB-A: 50%% reads, 50%% updates, scrambled zipfian 0.99). Each point ran %v; tasks are goroutines issuing operations over the given client connections (RC QPs, up to 64 operations in flight each): one for the YCSB-C and YCSB-A rows, up to %d (Smart's workers) in the RACE vs Smart-HT sweep. Their pollers park on completion events, except the first row's (one task), whose client spins 2,000 polls before parking: unloaded latency.", records, value, point, fig7Workers),
		"The node (its soft NIC, and for Pilaf its RPC handlers) runs in this process on its own tcp device; the clients on another. p50 and p99 are per-operation latency; round_trips is request lists plus RPCs per operation, counted by the clients.",
	)
	if p, ok := getP50["prism-kv"]; ok && getP50["pilaf"] > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("GET median, one task on a client of its own that spins before parking (the first YCSB-C row; its PRISM-KV slot cache starts cold, hence probing): PRISM-KV %.1f µs vs Pilaf %.1f µs = %.2f×.", p, getP50["pilaf"], p/getP50["pilaf"]))
	}
	if fig7["race"] > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("YCSB-A (zipfian) at %d tasks: Smart-HT %.3f Mops vs RACE %.3f Mops = %.2f×.",
			taskCounts[len(taskCounts)-1], fig7["smart-ht"]/1e6, fig7["race"]/1e6, fig7["smart-ht"]/fig7["race"]))
	}
	return r, nil
}
