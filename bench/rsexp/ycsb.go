package rsexp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "rs-ycsb",
		Description: "replicated block stores (n = 3, 4 KiB blocks) next to etcd on loopback: YCSB A, B, C over block ids, uniform and zipfian, " +
			"1, 8 and 32 clients; throughput, p50, p99, round trips and replica CPU per operation",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) { return runYCSB(ctx, env, systems) },
	})
}

var columns = []bench.Column{
	{Name: "system"}, {Name: "transport"}, {Name: "workload"}, {Name: "keys"}, {Name: "clients"},
	{Name: "rate", Unit: "kops"}, {Name: "spread", Unit: "%"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "read_p50", Unit: "µs"}, {Name: "write_p50", Unit: "µs"},
	{Name: "trips", Unit: "/op"}, {Name: "replica_cpu", Unit: "µs/op"}, {Name: "client_cpu", Unit: "µs/op"},
	{Name: "rate_vs_etcd", Unit: "×"}, {Name: "p50_vs_etcd", Unit: "×"},
}

// The sweep: every system at every point, in this order.
var (
	ycsbWorkloads = []string{"a", "b", "c"}
	keyDists      = []string{"uniform", "zipfian"}
	clientCounts  = []int{1, 8, 32}
)

// The volume and the run's shape.
const (
	replicas  = 3
	blockSize = blockstore.DefaultBlockSize
	// fullRecords and quickRecords are the blocks YCSB loads (the volume
	// has one more: see workload.BlockDB).
	fullRecords, quickRecords = 10000, 1000
	// fullRounds is how often a full run measures every point; the
	// medians of the rounds are reported.
	fullRounds = 3
	// loaders is the clients that load the volume, in parallel.
	loaders = 8
	// runGrace bounds how long a point may run past its duration before
	// its context ends the operations still waiting (a system that hangs
	// fails the run instead of holding it for good).
	runGrace = 30 * time.Second
)

// point is one cell of the sweep.
type point struct {
	workload, dist string
	clients        int
}

// sample is one run of a system at a point.
type sample struct {
	res                          workload.Result
	readP50, writeP50            time.Duration // 0: no such operation
	trips, replicaCPU, clientCPU float64       // per operation; NaN: unknown
}

// running is a started system with its clients, loaded.
type running struct {
	sys     system
	dep     *deployment
	clients []*timedStore
	dbs     []ycsb.DB
	samples map[point][]sample
}

// ycsbRun is the state of one rs-ycsb run.
type ycsbRun struct {
	env     *bench.Env
	base    workload.YCSB
	vol     volume
	points  []point
	wls     map[[2]string]ycsb.Workload // by workload and key distribution
	sys     []*running
	skipped []string
	errs    []string
}

// runYCSB runs rs-ycsb over the systems given.
func runYCSB(ctx context.Context, env *bench.Env, systems []system) (*bench.Result, error) {
	pointTime := env.PointDuration(time.Second, 200*time.Millisecond)
	records, rounds := int64(fullRecords), fullRounds
	if env.Quick {
		records, rounds = quickRecords, 1
	}
	u := &ycsbRun{env: env, vol: volume{replicas: replicas, blockSize: blockSize, blocks: uint64(records) + 1},
		base: workload.YCSB{Records: records, ValueSize: blockSize, Duration: pointTime, OrderedKeys: true},
		wls:  map[[2]string]ycsb.Workload{}}
	for _, w := range ycsbWorkloads {
		for _, d := range keyDists {
			for _, c := range clientCounts {
				u.points = append(u.points, point{w, d, c})
			}
		}
	}
	defer u.stopAll()
	steps := len(systems) * (1 + rounds*len(u.points))
	bar := env.Progress(steps, time.Duration(steps)*pointTime, "rs-ycsb")
	defer bar.Finish()

	for _, s := range systems {
		if err := u.start(ctx, s); err != nil {
			return nil, err
		}
		bar.Add(1)
	}
	if err := u.sweep(ctx, rounds, bar); err != nil {
		return nil, err
	}
	r := &bench.Result{Name: "rs-ycsb", Title: "replicated block stores vs etcd (n = 3, 4 KiB blocks, YCSB over block ids)", Columns: columns}
	u.rows(r)
	if len(r.Rows) > 0 {
		for _, w := range ycsbWorkloads {
			r.Plots = append(r.Plots, bench.Plot{Title: "YCSB-" + strings.ToUpper(w) + ", zipfian keys: throughput", X: "clients", Y: "rate",
				Series: []string{"system"}, Where: map[string]string{"workload": strings.ToUpper(w), "keys": "zipfian"}, LogX: true, LogY: true})
		}
	}
	u.notes(ctx, r, pointTime, rounds)
	var ts []string
	for _, rs := range u.sys {
		ts = append(ts, rs.sys.name+": "+rs.dep.transport)
	}
	r.Meta.Transport = strings.Join(ts, "; ")
	return r, nil
}

// sweep measures every running system at every point, rounds times,
// the systems in turn at each point.
func (u *ycsbRun) sweep(ctx context.Context, rounds int, bar *bench.Progress) error {
	for _, w := range ycsbWorkloads {
		for _, d := range keyDists {
			y := u.base
			y.Workload, y.Distribution = w, d
			wl, err := y.Load(ctx, nil) // the workload alone: the blocks are loaded
			if err != nil {
				return err
			}
			u.wls[[2]string{w, d}] = wl
		}
	}
	for range rounds {
		for _, p := range u.points {
			for _, rs := range u.sys {
				sm, err := u.measure(ctx, rs, p)
				if err == nil {
					err = ctx.Err() // a cut-short point is no figure
				}
				if err != nil {
					return err
				}
				rs.samples[p] = append(rs.samples[p], sm)
				bar.Add(1)
			}
		}
	}
	return nil
}

// start brings up s, opens its clients and loads the volume; a system
// that cannot run here is noted and left out.
func (u *ycsbRun) start(ctx context.Context, s system) error {
	dep, err := s.start(ctx, u.env, u.vol)
	if skippable(err) {
		u.skipped = append(u.skipped, fmt.Sprintf("%s: no rows (%v).", s.name, err))
		u.env.Log.Warn("rs-ycsb: system left out", "system", s.name, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	rs := &running{sys: s, dep: dep, samples: map[point][]sample{}}
	u.sys = append(u.sys, rs) // stopped by stopAll from here on
	for range slices.Max(clientCounts) {
		c, err := dep.open(ctx)
		if err != nil {
			return fmt.Errorf("%s: client: %w", s.name, err)
		}
		t := &timedStore{Store: c}
		rs.clients = append(rs.clients, t)
		rs.dbs = append(rs.dbs, workload.BlockDB{Store: t})
	}
	y := u.base
	y.Workload = "a"
	if _, err := y.Load(ctx, rs.dbs[:loaders]); err != nil {
		return fmt.Errorf("%s: loading %d blocks: %w", s.name, u.base.Records, err)
	}
	return nil
}

// stopAll closes every client and stops every system.
func (u *ycsbRun) stopAll() {
	for _, rs := range u.sys {
		for _, c := range rs.clients {
			c.Close()
		}
		rs.dep.stop()
	}
}
