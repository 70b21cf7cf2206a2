package txnexp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// system is a transactional database an experiment measures: the name of
// its rows and how to bring it up.
type system struct {
	name string
	// transport is how its client reaches it ("" for PostgreSQL): with
	// name, what bench.Options.Only selects.
	transport string
	// start brings up a database that holds about size.records records
	// and returns how to reach it. An error for which skippable is true
	// leaves the system out of the run, its reason in the notes; any
	// other error ends the run.
	start func(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error)
}

// keep returns the systems env's Only selects (all without it), or an
// error naming the choices when it selects none.
func keep(env *bench.Env, systems []system) ([]system, error) {
	var out []system
	var names []string
	for _, s := range systems {
		n := s.name
		if s.transport != "" {
			n += "/" + s.transport
		}
		names = append(names, n)
		if env.Keeps(s.name, s.transport) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --only %s names none of this experiment's systems (%s)",
			errNoSystem, strings.Join(env.Only, ","), strings.Join(names, ", "))
	}
	return out, nil
}

// errNoSystem: Options.Only left no system to run.
var errNoSystem = errors.New("txnexp: no system selected")

// dbSize is what a database must hold: about records records (every
// workload's population together), values up to valueSize bytes.
type dbSize struct {
	records   int
	valueSize int
}

// deployment is a started system. Exactly one of db and pg is set.
type deployment struct {
	// transport says how the client reaches the nodes, for the table.
	transport string
	// pids returns the server's processes now: their CPU time, from
	// /proc/PID/stat, is the node CPU per transaction.
	pids func() []int
	// db is the client of an rdmakit protocol, shared by every client
	// goroutine; counters its committed transactions and round trips so
	// far.
	db       txn.DB
	counters func() (commits, trips uint64)
	// commitTrips, when not nil (FORD), counts the round trips of the
	// client's read-write commits after execution: summed, their
	// commits, and the most one took so far.
	commitTrips func() (rounds, commits, most uint64)
	// pg is PostgreSQL's connection pool.
	pg *peers.PGTxn
	// stop ends the servers and removes what they left behind. It is
	// called once, also when the run fails.
	stop func()
}

// runFunc runs a workload's operations on a loaded database for cfg's
// duration from cfg.Threads goroutines.
type runFunc func(ctx context.Context, cfg workload.TxnRun) (*workload.TxnResult, error)

// moneyFunc checks SmallBank's invariant after runs on a freshly loaded
// bank.
type moneyFunc func(ctx context.Context, runs ...*workload.TxnResult) error

// onDB runs wl on db, every committed transaction's trace into h.
func onDB[O any](db txn.DB, wl workload.TxnWorkload[O], h *check.History) runFunc {
	return func(ctx context.Context, cfg workload.TxnRun) (*workload.TxnResult, error) {
		cfg.Trace = h.Add
		return workload.RunTxn(ctx, cfg, wl, db)
	}
}

// onPG runs wl's operations on PostgreSQL through exec.
func onPG[O any](wl workload.TxnWorkload[O], exec workload.TxnExec[O]) runFunc {
	return func(ctx context.Context, cfg workload.TxnRun) (*workload.TxnResult, error) {
		return workload.RunTxnFunc(ctx, cfg, wl, exec)
	}
}

// loaders is the goroutines that load a population.
const loaders = 8

// load writes a population through d's client, every load transaction's
// trace into h (nil for PostgreSQL, which load does not reach).
func (d *deployment) load(ctx context.Context, h *check.History, fn func(context.Context, txn.DB, workload.TxnLoad) error) error {
	return fn(ctx, d.db, workload.TxnLoad{Threads: loaders, Trace: h.Add})
}

// errUnavailable is wrapped by a system's start when it cannot run on
// this machine: the run goes on without it.
var errUnavailable = errors.New("txnexp: system unavailable")

// skippable reports whether a system's start failed because the system
// cannot run here, rather than because it broke.
func skippable(err error) bool {
	return errors.Is(err, errUnavailable) || errors.Is(err, peers.ErrNotInstalled) ||
		errors.Is(err, peers.ErrNoTmpfs) || errors.Is(err, bench.ErrNoCommand)
}

// runGrace bounds how long a point may run past its duration before its
// context ends the transactions still waiting: a system that hangs fails
// the run instead of holding it for good.
const runGrace = 30 * time.Second

// sample is one run of a system at a point.
type sample struct {
	res             *workload.TxnResult
	trips, nodeCPU  float64 // per committed transaction; NaN: unknown
	checked         int     // transactions in the history checked after it (0: not traced)
	unknown, failed int64
	// commitRounds and commitTxns are the point's share of
	// deployment.commitTrips' sums (0 without it).
	commitRounds, commitTxns uint64
}

// cpu sums the CPU time the processes pids have used; NaN if one cannot
// be read.
func cpu(pids []int) float64 {
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

// measure runs run on dep for d from threads goroutines, then checks h
// (when not nil): a history that is not serializable is the error.
func measure(ctx context.Context, dep *deployment, run runFunc, h *check.History, threads int, d time.Duration) (sample, error) {
	rctx, cancel := context.WithTimeout(ctx, d+runGrace)
	defer cancel()
	pids := dep.pids()
	trips := func() (uint64, uint64) { return 0, 0 }
	if dep.counters != nil {
		trips = dep.counters
	}
	commitTrips := func() (uint64, uint64, uint64) { return 0, 0, 0 }
	if dep.commitTrips != nil {
		commitTrips = dep.commitTrips
	}
	c0, t0 := trips()
	r0, n0, _ := commitTrips()
	cpu0 := cpu(pids)
	res, err := run(rctx, workload.TxnRun{Threads: threads, Duration: d})
	cpu1 := cpu(pids)
	c1, t1 := trips()
	r1, n1, _ := commitTrips()
	if err == nil {
		err = ctx.Err() // a cut-short point is no figure
	}
	if err != nil {
		return sample{}, err
	}
	s := sample{res: res, trips: math.NaN(), unknown: res.Unknown, failed: res.Failed, commitRounds: r1 - r0, commitTxns: n1 - n0}
	if dep.counters != nil && c1 > c0 {
		s.trips = float64(t1-t0) / float64(c1-c0)
	}
	s.nodeCPU = (cpu1 - cpu0) / 1e3 / float64(max(res.Committed, 1))
	if h != nil {
		if err := h.Check(); err != nil {
			return sample{}, err
		}
		s.checked = h.Len()
	}
	return s, nil
}
