package rsexp

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
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
	for _, w := range ycsbWorkloads {
		for _, d := range keyDists {
			y := u.base
			y.Workload, y.Distribution = w, d
			wl, err := y.Load(ctx, nil) // the workload alone: the blocks are loaded
			if err != nil {
				return nil, err
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
					return nil, err
				}
				rs.samples[p] = append(rs.samples[p], sm)
				bar.Add(1)
			}
		}
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

// trips sums the round trips of rs's clients; NaN if they do not count.
func (rs *running) trips() float64 {
	var n uint64
	for _, c := range rs.clients {
		rt, ok := c.Store.(roundTripper)
		if !ok {
			return math.NaN()
		}
		n += rt.RoundTrips()
	}
	return float64(n)
}

// cpu sums the CPU time the processes pids have used; NaN if one cannot
// be read.
func cpu(pids ...int) float64 {
	var sum time.Duration
	for _, p := range pids {
		d, err := bench.ProcCPU(p)
		if err != nil {
			return math.NaN()
		}
		sum += d
	}
	return float64(sum)
}

// measure runs rs at p for a point's duration.
func (u *ycsbRun) measure(ctx context.Context, rs *running, p point) (sample, error) {
	clients := rs.clients[:p.clients]
	for _, c := range clients {
		c.take()
	}
	y := u.base
	y.Workload, y.Distribution, y.Threads = p.workload, p.dist, p.clients
	rctx, cancel := context.WithTimeout(ctx, y.Duration+runGrace)
	defer cancel()
	t0, r0, c0 := rs.trips(), cpu(rs.dep.pids...), cpu(os.Getpid())
	res, err := y.Run(rctx, u.wls[[2]string{p.workload, p.dist}], rs.dbs[:p.clients])
	t1, r1, c1 := rs.trips(), cpu(rs.dep.pids...), cpu(os.Getpid())
	if err != nil {
		return sample{}, fmt.Errorf("%s, YCSB-%s %s, %d clients: %w", rs.sys.name, strings.ToUpper(p.workload), p.dist, p.clients, err)
	}
	if res.Errors > 0 {
		u.errs = append(u.errs, fmt.Sprintf("%s, YCSB-%s %s, %d clients: %d of %d operations failed (first: %v)",
			rs.sys.name, strings.ToUpper(p.workload), p.dist, p.clients, res.Errors, res.Errors+res.Ops, res.FirstErr))
	}
	var reads, writes []time.Duration
	for _, c := range clients {
		r, w := c.take()
		reads, writes = append(reads, r...), append(writes, w...)
	}
	ops := float64(max(res.Ops, 1))
	return sample{res: res, readP50: median(reads), writeP50: median(writes),
		trips: (t1 - t0) / ops, replicaCPU: (r1 - r0) / 1e3 / ops, clientCPU: (c1 - c0) / 1e3 / ops}, nil
}

// find returns the running system named name, or nil.
func (u *ycsbRun) find(name string) *running {
	for _, rs := range u.sys {
		if rs.sys.name == name {
			return rs
		}
	}
	return nil
}

// med is the median over rs's rounds at p of f, NaN where f is.
func (rs *running) med(p point, f func(sample) float64) float64 {
	var v []float64
	for _, s := range rs.samples[p] {
		if x := f(s); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func kops(s sample) float64 { return s.res.Rate() / 1e3 }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// num is x, or nil (not applicable) for NaN.
func num(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

// positive is num for a latency that 0 means absent.
func positive(x float64) any {
	if x <= 0 {
		return nil
	}
	return num(x)
}

func (u *ycsbRun) rows(r *bench.Result) {
	ref := u.find("etcd")
	for _, p := range u.points {
		for _, rs := range u.sys {
			if len(rs.samples[p]) == 0 {
				continue
			}
			rate := rs.med(p, kops)
			spread := math.NaN() // none with one round
			if len(rs.samples[p]) > 1 {
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, s := range rs.samples[p] {
					lo, hi = min(lo, kops(s)), max(hi, kops(s))
				}
				spread = 100 * (hi - lo) / rate
			}
			p50 := rs.med(p, func(s sample) float64 { return us(s.res.P50) })
			var rateVs, p50Vs any
			if ref != nil && len(ref.samples[p]) > 0 {
				rateVs = num(rate / ref.med(p, kops))
				p50Vs = num(p50 / ref.med(p, func(s sample) float64 { return us(s.res.P50) }))
			}
			r.AddRow(rs.sys.name, rs.dep.transport, strings.ToUpper(p.workload), p.dist, p.clients,
				rate, num(spread), p50, rs.med(p, func(s sample) float64 { return us(s.res.P99) }),
				positive(rs.med(p, func(s sample) float64 { return us(s.readP50) })),
				positive(rs.med(p, func(s sample) float64 { return us(s.writeP50) })),
				num(rs.med(p, func(s sample) float64 { return s.trips })),
				num(rs.med(p, func(s sample) float64 { return s.replicaCPU })),
				num(rs.med(p, func(s sample) float64 { return s.clientCPU })),
				rateVs, p50Vs)
		}
	}
}

func (u *ycsbRun) notes(ctx context.Context, r *bench.Result, pointTime time.Duration, rounds int) {
	n := &r.Notes
	*n = append(*n, u.skipped...)
	if len(u.errs) > 0 {
		*n = append(*n, "Failed operations (not counted in rate or latency): "+strings.Join(u.errs, "; ")+".")
	}
	*n = append(*n,
		fmt.Sprintf("Every system serves one volume of %d blocks of %d bytes on %d replicas, each replica its own process on this machine, reached over loopback. "+
			"Each is started and loaded first (%d blocks written by %d clients), then the systems run in turn at every point for %v each, %d round(s); every figure is the median of the rounds and spread is (max−min)/median of the rate.",
			u.vol.blocks, u.vol.blockSize, u.vol.replicas, u.base.Records, loaders, pointTime, rounds),
		"YCSB core workloads from go-ycsb v1.0.1 over block ids (workload.BlockDB: record N is block N, a read is a Read of the whole block, an update a Write of it): A 50% reads / 50% writes, B 95/5, C reads only; keys uniform or scrambled zipfian 0.99 (which also draws the one block past the loaded ones, read as zeros). "+
			"clients is the goroutines issuing operations, one at a time each, each with a client (a Store) of its own.",
		"p50 and p99 are go-ycsb operation latencies (for writes they include go-ycsb's making of the 4 KiB value); read_p50 and write_p50 time the Store's Read and Write calls alone.",
		"trips is round trips per operation as the client counts them (a phase sent to every replica at once is one). etcd's client sends one gRPC request per operation, spread round-robin over the members; inside the cluster a follower forwards it to the leader, which replicates a Put to a majority (Raft) and confirms its leadership with a majority before it answers a linearizable Get (ReadIndex): at least two network round trips on the critical path, counted as one here.",
		"replica_cpu is the replicas' processes' utime+stime (/proc/PID/stat, all threads, summed over the replicas, 10 ms ticks) over the run divided by its operations; client_cpu the same for this process, which holds every client of every system.",
		"rate_vs_etcd and p50_vs_etcd divide a row's rate and p50 by etcd's at the same workload, keys and clients, in the same run.",
	)
	if rs := u.find("etcd"); rs != nil {
		v, err := peers.EtcdVersion(ctx)
		if err != nil {
			v = "unknown version"
		}
		*n = append(*n, fmt.Sprintf("etcd %s (Debian etcd-server): %d members on 127.0.0.1 started by the experiment (peers.StartEtcd), data directories on tmpfs, --unsafe-no-fsync (nobody pays for a disk), revision auto-compaction, snapshot every 10,000 entries, 8 GiB quota; each client is a go.etcd.io/etcd/client/v3 client (peers.EtcdBlocks: a key per block, linearizable Get, Put).",
			v, u.vol.replicas))
	}
	*n = append(*n, "The machine's cores are shared by every replica and every client: the figures are what this box gives, for comparing the systems in one run, not absolute speeds.")
}
