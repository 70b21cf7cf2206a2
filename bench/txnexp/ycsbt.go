package txnexp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "txn-ycsbt",
		Description: "PRISM-TX and FORD next to FaRM on YCSB-T over tcp (PRISM Fig. 10): committed throughput and median latency against zipf skew " +
			"0.5 to 0.99, p99, aborts, round trips and node CPU per transaction; every point checked for serializability",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			return runYCSBT(ctx, env, ycsbtSystems)
		},
	})
}

var ycsbtColumns = []bench.Column{
	{Name: "system"}, {Name: "transport"}, {Name: "zipf"}, {Name: "clients"},
	{Name: "rate", Unit: "ktxn/s"}, {Name: "spread", Unit: "%"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "aborts", Unit: "/txn"}, {Name: "trips", Unit: "/txn"}, {Name: "node_cpu", Unit: "µs/txn"},
	{Name: "checked", Unit: "txns"}, {Name: "rate_vs_farm", Unit: "×"}, {Name: "p50_vs_farm", Unit: "×"},
}

// ycsbtSystems are what txn-ycsbt compares, FaRM first: the ratios are
// against it.
var ycsbtSystems = []system{
	{name: "FaRM", transport: overTCP, start: farmOn(overTCP)},
	{name: "PRISM-TX", transport: overTCP, start: prismTXOn(overTCP)},
	{name: fordName, transport: overTCP, start: fordOn(overTCP)},
}

// The sweep and the run's shape.
var (
	zipfs      = []float64{0.5, 0.6, 0.7, 0.8, 0.9, 0.99}
	quickZipfs = []float64{0.5, 0.99}
)

const (
	// ycsbtClients is the client goroutines of every point.
	ycsbtClients = 8
	// ycsbtKeys and quickYCSBTKeys are the records YCSB-T loads.
	ycsbtKeys, quickYCSBTKeys = 100000, 1000
	// fullRounds is how often a full run measures every point; the
	// medians of the rounds are reported.
	fullRounds = 3
	// valueSize is the largest value of any workload's record (YCSB-T's
	// 56 bytes, TATP's subscriber row of 45).
	valueSize = 64
)

// runYCSBT runs txn-ycsbt over systems.
func runYCSBT(ctx context.Context, env *bench.Env, systems []system) (*bench.Result, error) {
	systems, err := keep(env, systems)
	if err != nil {
		return nil, err
	}
	pointTime := env.PointDuration(2*time.Second, 200*time.Millisecond)
	keys, rounds, zs := int64(ycsbtKeys), fullRounds, zipfs
	if env.Quick {
		keys, rounds, zs = quickYCSBTKeys, 1, quickZipfs
	}
	var sys []*running
	var skipped []string
	steps := len(systems) * (1 + rounds*len(zs))
	bar := env.Progress(steps, time.Duration(steps)*pointTime, "txn-ycsbt")
	defer bar.Finish()
	for i, s := range systems {
		if i > 0 {
			settle()
		}
		rs, err := ycsbtAlone(ctx, env, s, keys, zs, rounds, pointTime, bar)
		if rs != nil {
			sys = append(sys, rs)
		} else if skippable(err) {
			skipped = append(skipped, fmt.Sprintf("%s: no rows (%v).", s.name, err))
			env.Log.Warn("txn-ycsbt: system left out", "system", s.name, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	r := &bench.Result{Name: "txn-ycsbt", Title: "PRISM-TX and FORD vs FaRM on YCSB-T against zipf skew (3 memory nodes over tcp)", Columns: ycsbtColumns}
	var notes []string
	ref := findRunning(sys, "FaRM")
	for _, z := range zs {
		for _, rs := range sys {
			st := medians(rs.samples[zipfLabel(z)])
			var rateVs, p50Vs any
			if ref != nil {
				fs := medians(ref.samples[zipfLabel(z)])
				rateVs, p50Vs = ratio(st.rate, fs.rate), ratio(st.p50, fs.p50)
			}
			r.AddRow(rs.sys.name, rs.transport, z, ycsbtClients, st.rate, num(st.spread), st.p50, st.p99,
				num(st.aborts), num(st.trips), num(st.nodeCPU), checkedCell(st.checked), rateVs, p50Vs)
			if n := failures(rs.sys.name, "zipf "+zipfLabel(z), st); n != "" {
				notes = append(notes, n)
			}
		}
	}
	if len(r.Rows) > 0 {
		r.Plots = []bench.Plot{
			{Title: "YCSB-T: committed throughput against skew", X: "zipf", Y: "rate", Series: []string{"system"}},
			{Title: "YCSB-T: median latency against skew", X: "zipf", Y: "p50", Series: []string{"system"}},
		}
	}
	r.Notes = append(append(skipped, notes...), ycsbtNotes(sys, zs, keys, pointTime, rounds)...)
	r.Meta.Transport = "tcp (loopback), nodes on devices with spin=0s"
	return r, nil
}

// ycsbtAlone measures s with no other system running: it starts s,
// loads keys, runs every round and skew on it (each point's history
// checked after it) and stops it, the history dropped. It returns s's
// samples once s started (with the error that ended its points, if
// one did), or no samples and start's error.
func ycsbtAlone(ctx context.Context, env *bench.Env, s system, keys int64, zs []float64, rounds int, pointTime time.Duration, bar *bench.Progress) (*running, error) {
	dep, err := s.start(ctx, env, dbSize{records: int(keys), valueSize: valueSize})
	if skippable(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	rs := newRunning(s, dep)
	defer rs.stop()
	h := check.NewHistory()
	if err := dep.load(ctx, h, (&workload.YCSBT{Keys: keys}).Load); err != nil {
		return rs, fmt.Errorf("%s: loading %d keys: %w", s.name, keys, err)
	}
	bar.Add(1)
	for range rounds {
		for _, z := range zs {
			w := &workload.YCSBT{Keys: keys, Zipf: z}
			sm, err := measure(ctx, dep, onDB(dep.db, w, h), h, ycsbtClients, pointTime)
			if err != nil {
				return rs, fmt.Errorf("%s, YCSB-T zipf %v: %w", s.name, z, err)
			}
			rs.samples[zipfLabel(z)] = append(rs.samples[zipfLabel(z)], sm)
			bar.Add(1)
		}
	}
	return rs, nil
}

func zipfLabel(z float64) string { return strconv.FormatFloat(z, 'g', -1, 64) }

// findRunning returns the running system named name, or nil.
func findRunning(sys []*running, name string) *running {
	for _, rs := range sys {
		if rs.sys.name == name {
			return rs
		}
	}
	return nil
}

// ycsbtNotes explain the table and compare PRISM-TX with FaRM.
func ycsbtNotes(sys []*running, zs []float64, keys int64, pointTime time.Duration, rounds int) []string {
	notes := []string{
		fmt.Sprintf("Each protocol's database is %d `rdmakit txn serve` memory nodes, each its own process on this machine, reached over tcp on loopback by one client (a txn.DB shared by the %d client goroutines) in the experiment's process. "+
			aloneNote+" "+
			"YCSB-T as Meerkat and PRISM run it: every transaction reads 1 to 4 distinct keys of %d and writes each back incremented (56-byte values), keys drawn by zipf with the constant of the row. "+
			"Each point runs %v, %d round(s); every figure is the median of the rounds and spread is (max−min)/median of the rate.",
			nodes, ycsbtClients, keys, pointTime, rounds),
		"rate counts committed transactions; p50 and p99 are the latencies of committed transactions from their first attempt to their commit, aborted attempts and backoff included; aborts is aborted attempts per committed transaction.",
		"trips is round trips per committed transaction as each client counts them, reads included: PRISM-TX counts the steps committed transactions waited for (a GET, prepare, the decision; installation runs after Commit returns); FaRM counts every READ list, log WRITE list and LOCK RPC of all its attempts, aborted ones included, divided by the commits; FORD every round (a set of post lists posted at once and waited for: a READ, a lock-and-read, validate, log, write-and-unlock) of all its attempts, divided by the commits.",
		"node_cpu is the memory nodes' processes' utime+stime (/proc/PID/stat, 10 ms ticks) over the point divided by its committed transactions: FaRM's nodes run LOCK and install records; PRISM-TX's only restock free lists and recycle replaced versions.",
		"checked is the transactions of the history check.Serializable found serializable after the point: every committed transaction of the system so far, loading included (a cycle, or a version read that no committed transaction wrote, fails the run).",
		"FaRM keeps each shard on a primary and one backup (primary-backup replication); FORD too (every copy locked and written one-sided, the nodes' CPUs idle); PRISM-TX keeps one copy per shard, as in the paper.",
	}
	farm, prism := findRunning(sys, "FaRM"), findRunning(sys, "PRISM-TX")
	if farm != nil && prism != nil {
		var parts []string
		for _, z := range zs {
			f, p := medians(farm.samples[zipfLabel(z)]), medians(prism.samples[zipfLabel(z)])
			parts = append(parts, fmt.Sprintf("zipf %s: p50 %.2f×, rate %.2f×", zipfLabel(z), p.p50/f.p50, p.rate/f.rate))
		}
		notes = append(notes, "PRISM-TX against FaRM, same run: "+strings.Join(parts, "; ")+".")
	}
	return append(notes, "The machine's cores are shared by the measured protocol's nodes and its client: the figures are what this box gives, for comparing the protocols in one run, not absolute speeds.")
}
