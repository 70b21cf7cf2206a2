package rsexp

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
)

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
		"trips is requests per operation as the client counts them: PRISM-RS and ABD over RPC count one per replica a phase goes to (a read that needs no write-back is 3 on 3 replicas, all in parallel: one round trip of latency; a write is two phases, 6), etcd one gRPC request. etcd's client sends one gRPC request per operation, spread round-robin over the members; inside the cluster a follower forwards it to the leader, which replicates a Put to a majority (Raft) and confirms its leadership with a majority before it answers a linearizable Get (ReadIndex): at least two network round trips on the critical path, counted as one here.",
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
	*n = append(*n, u.versus()...)
	*n = append(*n, "The machine's cores are shared by every replica and every client: the figures are what this box gives, for comparing the systems in one run, not absolute speeds.")
}

// versus compares every two systems other than etcd (the first listed
// against the second) at the most clients: the ratios of their rates,
// read and write medians and replica CPU per operation, one note per
// pair.
func (u *ycsbRun) versus() []string {
	var notes []string
	top := slices.Max(clientCounts)
	for i, a := range u.sys {
		for _, b := range u.sys[i+1:] {
			if a.sys.name == "etcd" || b.sys.name == "etcd" {
				continue
			}
			var parts []string
			for _, p := range u.points {
				if p.clients != top || len(a.samples[p]) == 0 || len(b.samples[p]) == 0 {
					continue
				}
				ratio := func(f func(sample) float64) string {
					x := a.med(p, f) / b.med(p, f)
					if math.IsNaN(x) || math.IsInf(x, 0) {
						return "n/a"
					}
					return fmt.Sprintf("%.2f×", x)
				}
				parts = append(parts, fmt.Sprintf("YCSB-%s %s: rate %s, read p50 %s, write p50 %s, replica CPU %s",
					strings.ToUpper(p.workload), p.dist, ratio(kops),
					ratio(func(s sample) float64 { return positiveOrNaN(us(s.readP50)) }),
					ratio(func(s sample) float64 { return positiveOrNaN(us(s.writeP50)) }),
					ratio(func(s sample) float64 { return s.replicaCPU })))
			}
			if len(parts) > 0 {
				notes = append(notes, fmt.Sprintf("%s against %s at %d clients, same run: %s.", a.sys.name, b.sys.name, top, strings.Join(parts, "; ")))
			}
		}
	}
	return notes
}

// positiveOrNaN is x, or NaN for a latency that 0 means absent.
func positiveOrNaN(x float64) float64 {
	if x <= 0 {
		return math.NaN()
	}
	return x
}
