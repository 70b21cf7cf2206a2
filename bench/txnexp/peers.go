package txnexp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "txn-peers",
		Description: "SmallBank and TATP on FaRM, PRISM-TX, FORD and Smart-DTX (over tcp and shm) next to PostgreSQL 15 SERIALIZABLE, 8 and 32 clients: throughput, p50, p99, " +
			"aborts, round trips and node CPU per transaction (FORD's commit round trips noted); serializability and SmallBank's money checked",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			return runPeers(ctx, env, peerSystems)
		},
	})
}

var peerColumns = []bench.Column{
	{Name: "system"}, {Name: "transport"}, {Name: "workload"}, {Name: "clients"},
	{Name: "rate", Unit: "ktxn/s"}, {Name: "spread", Unit: "%"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "aborts", Unit: "/txn"}, {Name: "trips", Unit: "/txn"}, {Name: "node_cpu", Unit: "µs/txn"},
	{Name: "checked", Unit: "txns"}, {Name: "rate_vs_pg", Unit: "×"},
}

// pgName is PostgreSQL's rows' system: the ratios are against it.
const pgName = "PostgreSQL"

// peerSystems are what txn-peers compares, in the order of its rows.
var peerSystems = []system{
	{name: pgName, start: startPostgres},
	{name: "FaRM", transport: overTCP, start: farmOn(overTCP)},
	{name: "PRISM-TX", transport: overTCP, start: prismTXOn(overTCP)},
	{name: fordName, transport: overTCP, start: fordOn(overTCP)},
	{name: smartDTXName, transport: overTCP, start: smartDTXOn(overTCP)},
	{name: "FaRM", transport: overSHM, start: farmOn(overSHM)},
	{name: "PRISM-TX", transport: overSHM, start: prismTXOn(overSHM)},
	{name: fordName, transport: overSHM, start: fordOn(overSHM)},
	{name: smartDTXName, transport: overSHM, start: smartDTXOn(overSHM)},
}

// fordName is FORD's rows' system.
const fordName = "FORD"

// The sweep.
var (
	peerWorkloads = []string{"SmallBank", "TATP"}
	peerClients   = []int{8, maxClients}
)

// The populations: the standard ones, and small ones for quick runs.
const (
	fullAccounts, quickAccounts       = 100000, 1000
	fullSubscribers, quickSubscribers = 100000, 1000
)

// loadedWorkload is one workload loaded on one system.
type loadedWorkload struct {
	run   runFunc
	hist  *check.History // nil: not traced (PostgreSQL)
	money moneyFunc      // nil: no invariant (TATP)
	runs  []*workload.TxnResult
}

// peerRun is the state of one txn-peers run.
type peerRun struct {
	sb        *workload.SmallBank
	tatp      *workload.TATP
	rounds    int
	pointTime time.Duration
	// sys is every system started so far, in order: all but the last
	// are stopped.
	sys []*running
	// loaded holds the workloads loaded on the system being measured; a
	// system's entry, and with it its histories, goes when it stops.
	loaded map[*running]map[string]*loadedWorkload
	// money names the systems whose SmallBank money held.
	money   []string
	skipped []string
}

// newPeerRun sizes a txn-peers run for env.
func newPeerRun(env *bench.Env) *peerRun {
	u := &peerRun{sb: &workload.SmallBank{Accounts: fullAccounts}, tatp: &workload.TATP{Subscribers: fullSubscribers},
		rounds: fullRounds, pointTime: env.PointDuration(2*time.Second, 200*time.Millisecond),
		loaded: map[*running]map[string]*loadedWorkload{}}
	if env.Quick {
		u.sb = &workload.SmallBank{Accounts: quickAccounts, HotAccounts: quickAccounts / 25}
		u.tatp = &workload.TATP{Subscribers: quickSubscribers}
		u.rounds = 1
	}
	return u
}

// runPeers runs txn-peers over systems.
func runPeers(ctx context.Context, env *bench.Env, systems []system) (*bench.Result, error) {
	return newPeerRun(env).run(ctx, env, systems)
}

// run measures the systems env keeps one after the other, each alone,
// and tabulates them.
func (u *peerRun) run(ctx context.Context, env *bench.Env, systems []system) (*bench.Result, error) {
	systems, err := keep(env, systems)
	if err != nil {
		return nil, err
	}
	steps := len(systems) * (1 + u.rounds*len(peerWorkloads)*len(peerClients))
	bar := env.Progress(steps, time.Duration(steps)*u.pointTime, "txn-peers")
	defer bar.Finish()
	for i, s := range systems {
		if i > 0 {
			settle()
		}
		if err := u.alone(ctx, env, s, bar); err != nil {
			return nil, err
		}
	}
	r := &bench.Result{Name: "txn-peers", Title: "SmallBank and TATP: rdmakit's transaction protocols next to PostgreSQL SERIALIZABLE", Columns: peerColumns}
	notes := u.rows(r)
	if len(r.Rows) > 0 {
		for _, wl := range peerWorkloads {
			r.Plots = append(r.Plots, bench.Plot{Title: wl + ": committed throughput", X: "clients", Y: "rate",
				Series: []string{"system", "transport"}, Where: map[string]string{"workload": wl}, LogY: true})
		}
	}
	r.Notes = append(append(u.skipped, notes...), u.notes(ctx)...)
	r.Notes = append(r.Notes, u.fordNotes()...)
	var ts []string
	for _, rs := range u.sys {
		ts = append(ts, rs.sys.name+": "+rs.transport)
	}
	r.Meta.Transport = strings.Join(ts, "; ")
	return r, nil
}

// alone measures s with no other system running: it starts s and loads
// it, runs every round, workload and client count on it (each point's
// history checked after it), checks its money, and stops it, its
// histories dropped.
func (u *peerRun) alone(ctx context.Context, env *bench.Env, s system, bar *bench.Progress) error {
	rs, err := u.start(ctx, env, s)
	if rs != nil {
		defer u.release(rs)
	}
	bar.Add(1)
	if err != nil || rs == nil {
		return err
	}
	for range u.rounds {
		for _, wl := range peerWorkloads {
			for _, c := range peerClients {
				l := u.loaded[rs][wl]
				sm, err := measure(ctx, rs.dep, l.run, l.hist, c, u.pointTime)
				if err != nil {
					return fmt.Errorf("%s, %s, %d clients: %w", rs.sys.name, wl, c, err)
				}
				l.runs = append(l.runs, sm.res)
				rs.samples[peerPoint(wl, c)] = append(rs.samples[peerPoint(wl, c)], sm)
				bar.Add(1)
			}
		}
	}
	return u.checkMoney(ctx, rs)
}

// checkMoney checks SmallBank's money on rs after its points.
func (u *peerRun) checkMoney(ctx context.Context, rs *running) error {
	for _, wl := range peerWorkloads {
		l := u.loaded[rs][wl]
		if l.money == nil {
			continue
		}
		if err := l.money(ctx, l.runs...); err != nil {
			return fmt.Errorf("%s, %s: money: %w", rs.sys.name, wl, err)
		}
		name := rs.sys.name
		if !rs.pg {
			name += " over " + rs.transport
		}
		u.money = append(u.money, name)
	}
	return nil
}

// release stops rs and drops its loaded workloads: nothing of its
// histories stays reachable.
func (u *peerRun) release(rs *running) {
	rs.stop()
	delete(u.loaded, rs)
}

func peerPoint(wl string, clients int) string { return wl + "/" + strconv.Itoa(clients) }

// start brings s up and loads both workloads on it. A system that
// cannot run here is noted and left out (nil, nil); once s is up, the
// returned system is not nil, a loading error with it.
func (u *peerRun) start(ctx context.Context, env *bench.Env, s system) (*running, error) {
	dep, err := s.start(ctx, env, dbSize{records: 3*u.sb.NumAccounts() + 10*u.tatp.NumSubscribers(), valueSize: valueSize})
	if skippable(err) {
		u.skipped = append(u.skipped, fmt.Sprintf("%s: no rows (%v).", s.name, err))
		env.Log.Warn("txn-peers: system left out", "system", s.name, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	rs := newRunning(s, dep)
	u.sys = append(u.sys, rs)
	if dep.pg != nil {
		return rs, u.loadPG(ctx, rs)
	}
	sbh, th := check.NewHistory(), check.NewHistory()
	if err := dep.load(ctx, sbh, u.sb.Load); err != nil {
		return rs, fmt.Errorf("%s: loading SmallBank: %w", s.name, err)
	}
	if err := dep.load(ctx, th, u.tatp.Load); err != nil {
		return rs, fmt.Errorf("%s: loading TATP: %w", s.name, err)
	}
	db := dep.db
	u.loaded[rs] = map[string]*loadedWorkload{
		"SmallBank": {run: onDB(db, u.sb, sbh), hist: sbh,
			money: func(ctx context.Context, runs ...*workload.TxnResult) error { return u.sb.CheckMoney(ctx, db, runs...) }},
		"TATP": {run: onDB(db, u.tatp, th), hist: th},
	}
	return rs, nil
}

// loadPG loads both workloads on PostgreSQL.
func (u *peerRun) loadPG(ctx context.Context, rs *running) error {
	sb, err := peers.LoadPGSmallBank(ctx, rs.dep.pg, u.sb)
	if err != nil {
		return fmt.Errorf("%s: loading SmallBank: %w", rs.sys.name, err)
	}
	t, err := peers.LoadPGTATP(ctx, rs.dep.pg, u.tatp, workload.TxnLoad{Threads: loaders})
	if err != nil {
		return fmt.Errorf("%s: loading TATP: %w", rs.sys.name, err)
	}
	u.loaded[rs] = map[string]*loadedWorkload{
		"SmallBank": {run: onPG(u.sb, sb.Exec), money: sb.CheckMoney},
		"TATP":      {run: onPG(u.tatp, t.Exec)},
	}
	return nil
}

// rows adds the table's rows and returns the notes on failures.
func (u *peerRun) rows(r *bench.Result) []string {
	var notes []string
	ref := findRunning(u.sys, pgName)
	for _, wl := range peerWorkloads {
		for _, c := range peerClients {
			for _, rs := range u.sys {
				st := medians(rs.samples[peerPoint(wl, c)])
				var rateVs any
				if ref != nil {
					rateVs = ratio(st.rate, medians(ref.samples[peerPoint(wl, c)]).rate)
				}
				r.AddRow(rs.sys.name, rs.transport, wl, c, st.rate, num(st.spread), st.p50, st.p99,
					num(st.aborts), num(st.trips), num(st.nodeCPU), checkedCell(st.checked), rateVs)
				if n := failures(rs.sys.name, fmt.Sprintf("%s at %d clients", wl, c), st); n != "" {
					notes = append(notes, n)
				}
			}
		}
	}
	return notes
}

// notes explain the table, say what was checked and compare the better
// rdmakit protocol with PostgreSQL at the most clients.
func (u *peerRun) notes(ctx context.Context) []string {
	notes := []string{
		fmt.Sprintf("SmallBank: %d customers (%d hot, 90%% of transactions on hot ones), the standard mix; TATP: %d subscribers, the standard mix (80%% read-only), NURand subscriber ids. "+
			"Every system runs the same operations (workload.SmallBankOp, workload.TATPOp): rdmakit's protocols through txn.Run, PostgreSQL in SQL. "+
			"Each point runs %v, %d round(s); every figure is the median of the rounds, spread is (max−min)/median of the rate.",
			u.sb.NumAccounts(), u.sb.NumHot(), u.tatp.NumSubscribers(), u.pointTime, u.rounds),
		aloneNote,
		fmt.Sprintf("FaRM, PRISM-TX, FORD and Smart-DTX (FORD's nodes): %d `rdmakit txn serve` memory nodes, each its own process, over tcp on loopback (the soft NIC as between hosts: every one-sided operation a frame the node's process executes) and over shm (this host's shared memory, as PostgreSQL's clients share its host: READs, WRITEs and atomics done by the client on the node's mapped memory, PRISM's extended operations by the node's process); one client (a txn.DB shared by the client goroutines) in the experiment's process. FaRM and FORD keep each shard on a primary and one backup (FORD writes both in its commit's one write-and-unlock round), PRISM-TX one copy per shard; FORD's nodes are plain memory (no per-transaction work by their CPUs), its reads from the primary.", nodes),
		"rate counts committed transactions (rejections by the transaction's own logic, as SmallBank's payment without the funds, are not); p50 and p99 time committed transactions from their first attempt to their commit, retries included; aborts is aborted attempts (PostgreSQL: serialization failures and deadlocks) per committed transaction.",
		"trips is round trips per committed transaction as the protocol's client counts them (see txn-ycsbt's notes); PostgreSQL's are not counted (n/a): each statement, BEGIN and COMMIT is one round trip on its socket.",
		"node_cpu is the servers' processes' utime+stime (/proc/PID/stat, 10 ms ticks: the memory nodes; PostgreSQL's postmaster, background processes and backends) over the point divided by its committed transactions.",
		"checked is the transactions of the history check.Serializable found serializable after the point (every committed transaction of that workload on that system so far, loading included; a cycle fails the run). PostgreSQL's transactions are not traced: its SERIALIZABLE isolation (SSI) is trusted.",
	}
	if len(u.money) > 0 {
		notes = append(notes, "SmallBank's money (the initial balances plus committed deposits minus withdrawals) held at the end on: "+strings.Join(u.money, ", ")+".")
	}
	if pg := findRunning(u.sys, pgName); pg != nil {
		top := slices.Max(peerClients)
		var parts []string
		for _, wl := range peerWorkloads {
			ref := medians(pg.samples[peerPoint(wl, top)]).rate
			var transports []string // of the rdmakit systems, in row order
			for _, rs := range u.sys {
				if rs != pg && !slices.Contains(transports, rs.transport) {
					transports = append(transports, rs.transport)
				}
			}
			for _, tr := range transports {
				best, bestName := 0.0, ""
				for _, rs := range u.sys {
					if rs == pg || rs.transport != tr {
						continue
					}
					if r := medians(rs.samples[peerPoint(wl, top)]).rate; r > best {
						best, bestName = r, rs.sys.name
					}
				}
				if bestName != "" && ref > 0 {
					parts = append(parts, fmt.Sprintf("%s over %s: %s %.2f× PostgreSQL", wl, tr, bestName, best/ref))
				}
			}
		}
		if len(parts) > 0 {
			notes = append(notes, fmt.Sprintf("The better rdmakit protocol at %d clients, same run: %s.", top, strings.Join(parts, "; ")))
		}
		v, err := peers.PostgresVersion(ctx, "")
		if err != nil {
			v = "unknown version"
		}
		notes = append(notes, fmt.Sprintf("PostgreSQL %s (Debian postgresql-15): a fresh cluster started by the experiment (peers.StartPostgres) in a temporary directory, fsync, synchronous_commit and full_page_writes off, a unix socket only; every transaction at SERIALIZABLE through pgx/v5, one connection per client, run again on serialization failures.", v))
	}
	return append(notes, "The machine's cores are shared by the measured system's servers and its clients: the figures are what this box gives, for comparing the systems in one run, not absolute speeds.")
}

// fordNotes state FORD's commit round trips on SmallBank (the issue's
// bound: at most three after execution) and its throughput against
// FaRM's, per transport.
func (u *peerRun) fordNotes() []string {
	var notes []string
	top := slices.Max(peerClients)
	for _, rs := range u.sys {
		if rs.sys.name != fordName || !rs.countsCommits {
			continue
		}
		var rounds, txns uint64
		for _, c := range peerClients {
			for _, sm := range rs.samples[peerPoint("SmallBank", c)] {
				rounds += sm.commitRounds
				txns += sm.commitTxns
			}
		}
		most := rs.mostCommitRounds
		n := fmt.Sprintf("FORD over %s: its read-write SmallBank commits took %.2f round trips on average after execution (validate the records only read, WRITE the redo log, write-and-unlock every copy; %d commits measured), "+
			"and no commit of the run took more than %d (SmallBank, TATP and loading; FORD's bound is 3). trips counts execution too: a READ per record read, a lock-and-read list per record written.",
			rs.transport, float64(rounds)/float64(max(txns, 1)), txns, most)
		for _, f := range u.sys {
			if f.sys.name == "FaRM" && f.transport == rs.transport {
				fr, fo := medians(f.samples[peerPoint("SmallBank", top)]).rate, medians(rs.samples[peerPoint("SmallBank", top)]).rate
				if fr > 0 {
					n += fmt.Sprintf(" SmallBank at %d clients: FORD %.2f× FaRM's rate, same run.", top, fo/fr)
				}
			}
		}
		notes = append(notes, n)
	}
	for _, rs := range u.sys {
		if rs.sys.name != smartDTXName {
			continue
		}
		n := fmt.Sprintf("Smart-DTX over %s: FORD's protocol on Smart's runtime (%d workers × %d tasks, each worker its own QPs and CQ; every technique on: work-request throttling, lock backoff, coroutine throttle; txn-smart sweeps them).",
			rs.transport, smartWorkers, maxClients/smartWorkers)
		for _, f := range u.sys {
			if f.sys.name == fordName && f.transport == rs.transport {
				for _, wl := range peerWorkloads {
					fs, ss := medians(f.samples[peerPoint(wl, top)]), medians(rs.samples[peerPoint(wl, top)])
					if fs.rate > 0 && fs.p50 > 0 {
						n += fmt.Sprintf(" %s at %d clients: %.2f× FORD's rate, p50 %.2f× FORD's, same run.", wl, top, ss.rate/fs.rate, ss.p50/fs.p50)
					}
				}
			}
		}
		notes = append(notes, n)
	}
	return notes
}
