package rsexp

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
)

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
