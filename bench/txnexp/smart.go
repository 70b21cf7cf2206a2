package txnexp

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/workload"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "txn-smart",
		Description: "Smart-DTX against FORD (Smart Fig. 15): SmallBank and TATP throughput and median latency against transactions per worker (1 to 16) " +
			"for FORD, FORD+ (per-worker QPs), Smart-DTX and each of its techniques alone, 3 FORD memory nodes as processes over tcp (and shm); serializability and SmallBank's money checked",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			transports := []string{overTCP, overSHM}
			if env.Quick {
				transports = transports[:1]
			}
			var targets []smartTargetFunc
			for _, tr := range transports {
				if smartKeeps(env, tr) {
					targets = append(targets, fordNodesOn(tr))
				}
			}
			if len(targets) == 0 {
				var names []string
				for _, v := range smartVariants {
					names = append(names, v.name)
				}
				return nil, fmt.Errorf("%w: --only %v: txn-smart's series are %s, over %s (NAME or NAME/TRANSPORT)",
					bench.ErrNoSystem, env.Only, strings.Join(names, ", "), strings.Join(transports, " and "))
			}
			return runSmart(ctx, env, targets)
		},
	})
}

var smartColumns = []bench.Column{
	{Name: "system"}, {Name: "transport"}, {Name: "workload"}, {Name: "workers"}, {Name: "tasks"}, {Name: "clients"},
	{Name: "rate", Unit: "ktxn/s"}, {Name: "spread", Unit: "%"}, {Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "aborts", Unit: "/txn"}, {Name: "trips", Unit: "/txn"}, {Name: "commit_trips", Unit: "/rw txn"},
	{Name: "retry_rate"}, {Name: "n_max"}, {Name: "limit", Unit: "WRs"},
	{Name: "checked", Unit: "txns"}, {Name: "rate_vs_ford", Unit: "×"}, {Name: "p50_vs_ford", Unit: "×"},
}

// smartVariant is one row series of txn-smart: FORD as it is (smart
// nil), or FORD on Smart's runtime with techniques on.
type smartVariant struct {
	name  string
	smart *ford.SmartConfig // nil: plain FORD; Workers and Tasks set per point
}

// The series, FORD first (the ratios are against it), then FORD+ (the
// runtime with no technique), Smart-DTX (all) and each technique alone.
const (
	fordPlusName = "FORD+"
	smartDTXName = "Smart-DTX"
)

var smartVariants = []smartVariant{
	{name: fordName},
	{name: fordPlusName, smart: &ford.SmartConfig{}},
	{name: smartDTXName, smart: &ford.SmartConfig{Techniques: ford.AllTechniques}},
	{name: "throttling", smart: &ford.SmartConfig{Techniques: ford.Throttling}},
	{name: "backoff", smart: &ford.SmartConfig{Techniques: ford.Backoff}},
	{name: "coroutine throttle", smart: &ford.SmartConfig{Techniques: ford.CoroutineThrottle}},
}

// The sweep: transactions per worker, on smartWorkers workers.
var (
	smartTasks      = []int{1, 2, 4, 8, 16}
	quickSmartTasks = []int{1, 8}
	smartWorkloads  = []string{"SmallBank", "TATP"}
)

// smartWorkers is every point's workers (the client's goroutines are
// workers × tasks, for plain FORD too).
const smartWorkers = 2

// smartTarget is one database of FORD memory nodes that txn-smart
// measures every series on: a client per point.
type smartTarget struct {
	transport string
	// pids are the nodes' processes.
	pids func() []int
	// loader is a plain FORD client that loads the workloads and checks
	// the money.
	loader txn.DB
	// open connects a client of series v for a point with workers and
	// tasks; its deployment's stop closes the client only.
	open func(ctx context.Context, v smartVariant, workers, tasks int) (*smartClient, error)
	stop func()
}

// smartClient is one point's client and its runtime's figures.
type smartClient struct {
	dep   *deployment
	stats func() []smart.Stats // nil for plain FORD
}

// smartTargetFunc starts a target that holds size.
type smartTargetFunc func(ctx context.Context, env *bench.Env, size dbSize) (*smartTarget, error)

// fordNodesOn starts three FORD memory nodes (`txn serve --protocol
// ford`, processes) over transport; each point dials a client on one
// device.
func fordNodesOn(transport string) smartTargetFunc {
	return func(ctx context.Context, env *bench.Env, size dbSize) (*smartTarget, error) {
		l := ford.Layout{F: 1, Buckets: perShard(size), ValueSize: size.valueSize, Coordinators: 256}
		ss, tok, clientDev, err := startNodes(ctx, env, "ford", transport, "--backups", strconv.Itoa(l.F),
			"--buckets", strconv.Itoa(l.Buckets), "--value-size", strconv.Itoa(l.ValueSize), "--coordinators", strconv.Itoa(l.Coordinators))
		if err != nil {
			return nil, err
		}
		dev, err := verbs.Open(clientDev)
		if err != nil {
			stopServers(ss)
			return nil, err
		}
		base := ford.Config{Dev: dev, Nodes: addrs(ss), Token: tok, Layout: l}
		loader, err := ford.Dial(ctx, base)
		if err != nil {
			dev.Close()
			stopServers(ss)
			return nil, fmt.Errorf("FORD: connect: %w", err)
		}
		open := func(ctx context.Context, v smartVariant, workers, tasks int) (*smartClient, error) {
			cfg := base
			cfg.MaxTx = max(64, workers*tasks)
			if v.smart != nil {
				sc := *v.smart
				sc.Workers, sc.Tasks = workers, tasks
				cfg.Smart = &sc
			}
			db, err := ford.Dial(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("%s: connect: %w", v.name, err)
			}
			d := &deployment{transport: transport, pids: func() []int { return pids(ss) }, db: db,
				counters: func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.Rounds },
				commitTrips: func() (uint64, uint64, uint64) {
					s := db.Stats()
					return s.CommitRounds, s.ReadWrite, s.MaxCommitRounds
				},
				stop: func() { db.Close() }}
			c := &smartClient{dep: d}
			if v.smart != nil {
				c.stats = db.SmartStats
			}
			return c, nil
		}
		return &smartTarget{transport: transport, pids: func() []int { return pids(ss) }, loader: loader, open: open,
			stop: func() { loader.Close(); dev.Close(); stopServers(ss) }}, nil
	}
}

// nan is an unknown figure.
var nan = math.NaN()

// smartSample is a point's sample and the runtime's figures at its end
// (the workers' means; NaN for plain FORD).
type smartSample struct {
	sample
	retryRate, nMax, limit float64
}

// smartRun is the state of one txn-smart run.
type smartRun struct {
	sb        *workload.SmallBank
	tatp      *workload.TATP
	rounds    int
	tasks     []int
	pointTime time.Duration
	// transports are the targets' measured so far, in order.
	transports []string
	// hists (by workload) and runs (SmallBank's, for the money) are the
	// target being measured's: dropped when it stops.
	hists  map[string]*check.History
	checks map[string]*doublingCheck
	runs   []*workload.TxnResult
	// checkedAll is the transactions each transport's final checks found
	// serializable, by transport and workload.
	checkedAll map[string]map[string]int
	samples    map[string][]smartSample // by smartKey
	// money names the transports whose SmallBank money held.
	money   []string
	skipped []string
}

func smartKey(transport, variant, wl string, tasks int) string {
	return transport + "/" + variant + "/" + wl + "/" + strconv.Itoa(tasks)
}

// newSmartRun sizes a txn-smart run for env.
func newSmartRun(env *bench.Env) *smartRun {
	u := &smartRun{sb: &workload.SmallBank{Accounts: fullAccounts}, tatp: &workload.TATP{Subscribers: fullSubscribers},
		rounds: fullRounds, tasks: smartTasks, pointTime: env.PointDuration(2*time.Second, 200*time.Millisecond),
		samples: map[string][]smartSample{}}
	if env.Quick {
		u.sb = &workload.SmallBank{Accounts: quickAccounts, HotAccounts: quickAccounts / 25}
		u.tatp = &workload.TATP{Subscribers: quickSubscribers}
		u.rounds, u.tasks = 1, quickSmartTasks
	}
	return u
}

// smartKeeps reports whether env's --only keeps any series over
// transport tr.
func smartKeeps(env *bench.Env, tr string) bool {
	for _, v := range smartVariants {
		if env.Keeps(v.name, tr) {
			return true
		}
	}
	return false
}

// runSmart runs txn-smart on the targets, one after the other, each
// alone.
func runSmart(ctx context.Context, env *bench.Env, starts []smartTargetFunc) (*bench.Result, error) {
	u := newSmartRun(env)
	steps := len(starts) * (1 + u.rounds*len(smartWorkloads)*len(u.tasks)*len(smartVariants))
	bar := env.Progress(steps, time.Duration(steps)*u.pointTime, "txn-smart")
	defer bar.Finish()
	for i, start := range starts {
		if i > 0 {
			settle()
		}
		if err := u.alone(ctx, env, start, bar); err != nil {
			return nil, err
		}
	}
	r := &bench.Result{Name: "txn-smart", Title: "Smart-DTX against FORD: throughput and median latency against transactions per worker (Smart Fig. 15)", Columns: smartColumns}
	notes := u.rows(r)
	if len(r.Rows) > 0 {
		for _, wl := range smartWorkloads {
			for _, tr := range u.transports {
				where := map[string]string{"workload": wl, "transport": tr}
				r.Plots = append(r.Plots,
					bench.Plot{Title: wl + " over " + tr + ": committed throughput", X: "tasks", Y: "rate", Series: []string{"system"}, Where: where, LogX: true},
					bench.Plot{Title: wl + " over " + tr + ": median latency", X: "tasks", Y: "p50", Series: []string{"system"}, Where: where, LogX: true})
			}
		}
	}
	r.Notes = append(append(u.skipped, notes...), u.notes()...)
	r.Meta.Transport = strings.Join(u.transports, ", ") + "; nodes on devices with spin=0s"
	return r, nil
}

// alone measures the target start brings up with no other target
// running: it loads both workloads, runs every round, workload, task
// count and series on it (the history checked as it doubles, and whole
// after the last point),
// checks the money, and stops it, its histories dropped. A target that
// cannot run here is noted and left out.
func (u *smartRun) alone(ctx context.Context, env *bench.Env, start smartTargetFunc, bar *bench.Progress) error {
	tg, err := start(ctx, env, dbSize{records: 3*u.sb.NumAccounts() + 10*u.tatp.NumSubscribers(), valueSize: valueSize})
	if skippable(err) {
		u.skipped = append(u.skipped, fmt.Sprintf("FORD's nodes: no rows (%v).", err))
		env.Log.Warn("txn-smart: transport left out", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer u.release(tg)
	u.transports = append(u.transports, tg.transport)
	sbh, th := check.NewHistory(), check.NewHistory()
	u.hists = map[string]*check.History{"SmallBank": sbh, "TATP": th}
	u.checks = map[string]*doublingCheck{"SmallBank": {h: sbh}, "TATP": {h: th}}
	if err := u.sb.Load(ctx, tg.loader, workload.TxnLoad{Threads: loaders, Trace: sbh.Add}); err != nil {
		return fmt.Errorf("FORD over %s: loading SmallBank: %w", tg.transport, err)
	}
	if err := u.tatp.Load(ctx, tg.loader, workload.TxnLoad{Threads: loaders, Trace: th.Add}); err != nil {
		return fmt.Errorf("FORD over %s: loading TATP: %w", tg.transport, err)
	}
	bar.Add(1)
	for range u.rounds {
		for _, wl := range smartWorkloads {
			for _, n := range u.tasks {
				for _, v := range smartVariants {
					if !env.Keeps(v.name, tg.transport) {
						continue
					}
					if err := u.point(ctx, tg, v, wl, n); err != nil {
						return fmt.Errorf("%s over %s, %s, %d tasks per worker: %w", v.name, tg.transport, wl, n, err)
					}
					bar.Add(1)
				}
			}
		}
	}
	all := map[string]int{}
	for _, wl := range smartWorkloads {
		n, err := u.checks[wl].final()
		if err != nil {
			return fmt.Errorf("FORD over %s, %s: %w", tg.transport, wl, err)
		}
		all[wl] = n
	}
	if u.checkedAll == nil {
		u.checkedAll = map[string]map[string]int{}
	}
	u.checkedAll[tg.transport] = all
	if err := u.sb.CheckMoney(ctx, tg.loader, u.runs...); err != nil {
		return fmt.Errorf("FORD over %s: SmallBank's money: %w", tg.transport, err)
	}
	u.money = append(u.money, tg.transport)
	return nil
}

// release stops tg and drops its histories and runs.
func (u *smartRun) release(tg *smartTarget) {
	tg.stop()
	u.hists, u.checks, u.runs = nil, nil, nil
}

// point measures series v over tg with n tasks per worker on wl: a new
// client, its history checked if it has doubled.
func (u *smartRun) point(ctx context.Context, tg *smartTarget, v smartVariant, wl string, n int) error {
	c, err := tg.open(ctx, v, smartWorkers, n)
	if err != nil {
		return err
	}
	defer c.dep.stop()
	h := u.hists[wl]
	run := onDB(c.dep.db, u.sb, h)
	if wl == "TATP" {
		run = onDB(c.dep.db, u.tatp, h)
	}
	sm, err := measure(ctx, c.dep, run, nil, smartWorkers*n, u.pointTime)
	if err != nil {
		return err
	}
	if sm.checked, err = u.checks[wl].maybe(); err != nil {
		return err
	}
	if wl == "SmallBank" {
		u.runs = append(u.runs, sm.res)
	}
	s := smartSample{sample: sm, retryRate: nan, nMax: nan, limit: nan}
	if c.stats != nil {
		st := c.stats()
		var rr, nm, lim float64
		for _, w := range st {
			rr += w.RetryRate
			nm += float64(w.Tasks)
			lim += float64(w.Limit)
		}
		if k := float64(len(st)); k > 0 {
			s.retryRate, s.nMax = rr/k, nm/k
			if v.smart.Techniques&ford.Throttling != 0 {
				s.limit = lim / k
			}
		}
	}
	key := smartKey(tg.transport, v.name, wl, n)
	u.samples[key] = append(u.samples[key], s)
	return nil
}

// rows adds the table's rows and returns the notes on failures.
func (u *smartRun) rows(r *bench.Result) []string {
	var notes []string
	for _, wl := range smartWorkloads {
		for _, tr := range u.transports {
			for _, n := range u.tasks {
				ref := u.stat(tr, fordName, wl, n)
				for _, v := range smartVariants {
					ss := u.samples[smartKey(tr, v.name, wl, n)]
					if len(ss) == 0 {
						continue // not measured (--only)
					}
					st := u.stat(tr, v.name, wl, n)
					r.AddRow(v.name, tr, wl, smartWorkers, n, smartWorkers*n, st.rate, num(st.spread), st.p50, st.p99,
						num(st.aborts), num(st.trips), num(commitTrips(ss)), num(medianOf(ss, func(s smartSample) float64 { return s.retryRate })),
						num(medianOf(ss, func(s smartSample) float64 { return s.nMax })), num(medianOf(ss, func(s smartSample) float64 { return s.limit })),
						checkedCell(st.checked), ratio(st.rate, ref.rate), ratio(st.p50, ref.p50))
					if f := failures(v.name+" over "+tr, fmt.Sprintf("%s at %d tasks per worker", wl, n), st); f != "" {
						notes = append(notes, f)
					}
				}
			}
		}
	}
	return notes
}

// stat is the medians of a series' samples at a point.
func (u *smartRun) stat(transport, variant, wl string, tasks int) stat {
	var ss []sample
	for _, s := range u.samples[smartKey(transport, variant, wl, tasks)] {
		ss = append(ss, s.sample)
	}
	return medians(ss)
}

// commitTrips is the round trips of the samples' read-write commits
// after execution, on average; NaN without any.
func commitTrips(ss []smartSample) float64 {
	var rounds, txns uint64
	for _, s := range ss {
		rounds += s.commitRounds
		txns += s.commitTxns
	}
	if txns == 0 {
		return nan
	}
	return float64(rounds) / float64(txns)
}

// medianOf is the median of f over ss, NaN figures left out.
func medianOf(ss []smartSample, f func(smartSample) float64) float64 {
	var v []float64
	for _, s := range ss {
		if x := f(s); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return nan
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// notes explain the table and compare Smart-DTX with FORD at the most
// tasks per worker.
func (u *smartRun) notes() []string {
	notes := []string{
		fmt.Sprintf("Each transport's database is %d `rdmakit txn serve --protocol ford` memory nodes, each its own process, every shard on a primary and one backup; SmallBank (%d customers, %d hot) and TATP (%d subscribers) loaded once by a plain FORD client. "+
			"Each point dials a new client of its series with %d workers and the row's tasks (transactions) per worker, runs workers × tasks client goroutines (plain FORD too, on its one QP per node) for %v, %d round(s), and closes it; figures are the medians of the rounds, spread (max−min)/median of the rate.",
			nodes, u.sb.NumAccounts(), u.sb.NumHot(), u.tatp.NumSubscribers(), smartWorkers, u.pointTime, u.rounds),
		aloneNote + " Within a transport the series share its nodes and loaded data, each point with a client of its own.",
		"Series: FORD is txn/ford as it is (one QP per node shared by every transaction); FORD+ runs it on Smart's runtime with no technique (per-worker QPs and CQs, the workers' tasks: ford.SmartConfig{}); Smart-DTX turns every technique on (ford.AllTechniques); " +
			"throttling (work-request credits, the limit tuned by Smart's epochs), backoff (a lock CAS that meets a live owner retried after a truncated exponential backoff) and coroutine throttle (n_max, the tasks a worker runs at once, cut while the lock retry rate is high) are each alone.",
		"rate counts committed transactions; p50 and p99 time them from the first attempt to the commit, retries and backoff included; aborts is aborted attempts per committed transaction; trips is every round (a set of post lists posted at once and waited for) of all attempts per committed transaction; commit_trips is the rounds of read-write commits after execution (validate, log, write-and-unlock: FORD's bound is 3).",
		"retry_rate, n_max and limit are the workers' means at the end of the point (smart.Stats; limit only with throttling on): the lock retry rate of the last evaluation, the tasks a worker may run at once, and its outstanding work requests allowed. rate_vs_ford and p50_vs_ford are against FORD's row of the same point.",
		"checked is the transactions of the workload's history check.Serializable had found serializable by the end of the point: every client of the transport adds to one history, loading included, checked whole whenever it has doubled since its last check and once more after the transport's last point (a check after every point would be quadratic in the points); a cycle fails the run.",
	}
	for _, tr := range u.transports {
		if all, ok := u.checkedAll[tr]; ok {
			notes = append(notes, fmt.Sprintf("Serializable over %s, the whole history after the last point: %d SmallBank and %d TATP transactions.", tr, all["SmallBank"], all["TATP"]))
		}
	}
	if len(u.money) > 0 {
		notes = append(notes, "SmallBank's money (the initial balances plus committed deposits minus withdrawals, over every series' runs) held at the end over: "+strings.Join(u.money, ", ")+".")
	}
	top := slices.Max(u.tasks)
	for _, tr := range u.transports {
		var parts []string
		for _, wl := range smartWorkloads {
			f, s := u.stat(tr, fordName, wl, top), u.stat(tr, smartDTXName, wl, top)
			if f.rate > 0 && f.p50 > 0 {
				parts = append(parts, fmt.Sprintf("%s: rate %.2f× FORD's, p50 %.2f× FORD's", wl, s.rate/f.rate, s.p50/f.p50))
			}
		}
		var ss []smartSample
		for _, n := range u.tasks {
			ss = append(ss, u.samples[smartKey(tr, fordName, "SmallBank", n)]...)
		}
		n := fmt.Sprintf("Smart-DTX against FORD over %s at %d tasks per worker (%d client goroutines), same run: %s.", tr, top, smartWorkers*top, strings.Join(parts, "; "))
		if ct := commitTrips(ss); !math.IsNaN(ct) {
			n += fmt.Sprintf(" FORD's read-write SmallBank commits took %.2f round trips on average after execution (every task count; the bound is 3).", ct)
		}
		notes = append(notes, n)
	}
	return append(notes, "The machine's cores are shared by the nodes and the client: Smart's techniques answer contention for a NIC's and a node's resources and for locks; on a small box the client's own CPU is the first bottleneck, so compare the series within one run, not with the paper's absolute figures.")
}
