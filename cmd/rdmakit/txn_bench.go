package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// errCheckNeedsLoad: --check verifies a history from an empty database
// on: the run must load it.
var errCheckNeedsLoad = fmt.Errorf("%w: --check needs --load (the checker must see who wrote every version, the loader included)", errTxnFlag)

// txnBenchOptions are a `txn bench` run's settings.
type txnBenchOptions struct {
	clients  int
	duration time.Duration
	load     bool
	check    bool
}

// txnBenchSpec is one workload ready to run: its name and size for the
// report, and the run itself.
type txnBenchSpec struct {
	title   string
	records int // about how many records it loads
	run     func(ctx context.Context, w io.Writer, db txn.DB, trips txnCounters, o txnBenchOptions) error
}

// txnWorkload returns the --workload named name over records records
// (0: the workload's standard size), YCSB-T's keys drawn with zipf.
func txnWorkload(name string, records int, zipf float64) (txnBenchSpec, error) {
	if records < 0 {
		return txnBenchSpec{}, fmt.Errorf("%w: --records %d: must not be negative", errTxnFlag, records)
	}
	switch name {
	case "smallbank":
		w := &workload.SmallBank{Accounts: records, HotAccounts: min(4000, max(records/25, 1))}
		if records == 0 {
			w.HotAccounts = 0
		}
		return txnBenchSpec{title: fmt.Sprintf("SmallBank (%d accounts, %d hot)", w.NumAccounts(), w.NumHot()), records: 3 * w.NumAccounts(),
			run: func(ctx context.Context, out io.Writer, db txn.DB, trips txnCounters, o txnBenchOptions) error {
				return benchTxn(ctx, out, db, trips, o, w, w.Load, func(ctx context.Context, res *workload.TxnResult) (string, error) {
					if err := w.CheckMoney(ctx, db, res); err != nil {
						return "", err
					}
					return fmt.Sprintf("holds: the balances add up to %d (initial %d %+d committed)", w.InitialTotal()+res.Delta, w.InitialTotal(), res.Delta), nil
				})
			}}, nil
	case "tatp":
		w := &workload.TATP{Subscribers: records}
		return txnBenchSpec{title: fmt.Sprintf("TATP (%d subscribers)", w.NumSubscribers()), records: 10 * w.NumSubscribers(),
			run: func(ctx context.Context, out io.Writer, db txn.DB, trips txnCounters, o txnBenchOptions) error {
				return benchTxn(ctx, out, db, trips, o, w, w.Load, nil)
			}}, nil
	case "ycsb-t":
		w := &workload.YCSBT{Keys: int64(records), Zipf: zipf}
		if err := w.Validate(); err != nil {
			return txnBenchSpec{}, fmt.Errorf("%w: %w", errTxnFlag, err)
		}
		keys := "uniform"
		if zipf > 0 {
			keys = fmt.Sprintf("zipf %.2f", zipf)
		}
		return txnBenchSpec{title: fmt.Sprintf("YCSB-T (%d keys, %s)", w.NumKeys(), keys), records: int(w.NumKeys()),
			run: func(ctx context.Context, out io.Writer, db txn.DB, trips txnCounters, o txnBenchOptions) error {
				return benchTxn(ctx, out, db, trips, o, w, w.Load, nil)
			}}, nil
	}
	return txnBenchSpec{}, fmt.Errorf("%w: --workload %q: want smallbank, tatp or ycsb-t", errTxnFlag, name)
}

func newTxnBenchCmd() *cobra.Command {
	var f txnClientFlags
	var o txnBenchOptions
	var name string
	var records int
	var zipf float64
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run SmallBank, TATP or YCSB-T on a database and report throughput, latency, aborts and round trips",
		Long: `bench runs a transaction workload from --clients goroutines (one transaction at
a time each, aborted ones retried) for --duration through one client of the
database, and prints committed transactions per second, the latency of
committed transactions (first attempt to commit, retries included), aborted
attempts by reason, and round trips per committed transaction as the protocol
counts them (FORD: also its commit's round trips after execution, mean and
most). --load writes the workload's records first (FaRM: it creates the
database, laid out for them; FORD: the nodes were laid out by their flags,
which must leave --buckets at about twice the records per shard). --check records the version every committed
transaction read and wrote and checks the history for serializability
(check.Serializable: no cycle in the direct serialization graph, no version
read that no committed transaction wrote), and for SmallBank that the money in
the bank is the initial money plus the committed deposits minus the
withdrawals; it needs --load. A failed check exits with an error.

smart-dtx is FORD on Smart's runtime (ford.Config.Smart) against FORD's nodes,
with FORD's flags: --workers workers, each with its own CQ and QPs, run --tasks
transactions at once each (--clients defaults to workers × tasks), with the
techniques --techniques switches on (all is Smart-DTX, none is FORD+: per-worker
QPs alone; throttling, backoff, coroutine alone or together; --limit fixes
throttling's work requests in flight). It prints FORD's figures and each
worker's at the end: its work-request limit, lock retry rate and n_max.
A FORD or smart-dtx client given --members (the nodes' membership addresses)
routes by the configuration the nodes hold and follows a failover.`,
		Example: `  rdmakit txn bench --protocol prism-tx --nodes A,B,C --workload smallbank --load --check
  rdmakit txn bench --protocol ford --nodes A,B,C --workload tatp --load --backup-reads --buckets 1048576
  rdmakit txn bench --protocol farm --nodes A,B,C --workload ycsb-t --zipf 0.99 --clients 16 --duration 10s
  rdmakit txn bench --protocol smart-dtx --nodes A,B,C --workload smallbank --load --workers 2 --tasks 8 --techniques all
  rdmakit txn bench --protocol smart-dtx --nodes A,B,C --workload tatp --load --techniques throttling --limit 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkClientProtocol(f.protocol); err != nil {
				return err
			}
			if f.protocol == protoSmartDTX && !cmd.Flags().Changed("clients") {
				o.clients = f.smart.slots()
			}
			switch {
			case o.clients <= 0 || o.clients > 1024:
				return fmt.Errorf("%w: --clients %d: want 1 to 1024", errTxnFlag, o.clients)
			case o.duration <= 0:
				return fmt.Errorf("%w: --duration %v: must be positive", errTxnFlag, o.duration)
			case o.check && !o.load:
				return errCheckNeedsLoad
			}
			spec, err := txnWorkload(name, records, zipf)
			if err != nil {
				return err
			}
			create := 0
			if o.load {
				create = spec.records
			}
			db, trips, err := f.open(ctx, create)
			if err != nil {
				return err
			}
			defer db.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s, %d clients, %v\n", f.protocol, spec.title, o.clients, o.duration)
			err = spec.run(ctx, cmd.OutOrStdout(), db, trips, o)
			if fdb, ok := db.(*ford.DB); ok && err == nil {
				s := fdb.Stats()
				fmt.Fprintf(cmd.OutOrStdout(), "commit trips  %.2f mean, %d most per read-write commit after execution (validate, log, write-and-unlock; %d commits, loading included)\n",
					float64(s.CommitRounds)/float64(max(s.ReadWrite, 1)), s.MaxCommitRounds, s.ReadWrite)
				if f.ford.members != "" {
					printConfiguration(cmd.OutOrStdout(), fdb.Configuration())
				}
				if sc, _ := f.smart.config(); f.protocol == protoSmartDTX && sc != nil {
					printSmartStats(cmd.OutOrStdout(), sc, fdb.SmartStats())
				}
			}
			return err
		},
	}
	f.add(cmd)
	f.smart.addSmart(cmd)
	fl := cmd.Flags()
	fl.StringVar(&name, "workload", "smallbank", "smallbank, tatp or ycsb-t")
	fl.IntVar(&records, "records", 0, "population: SmallBank accounts, TATP subscribers or YCSB-T keys (default: the workload's standard 100,000)")
	fl.Float64Var(&zipf, "zipf", 0, "ycsb-t: zipf constant of the keys (0.5 to 0.99; 0 for uniform)")
	fl.IntVar(&o.clients, "clients", 8, "goroutines running transactions, one at a time each (smart-dtx: default --workers × --tasks)")
	fl.DurationVar(&o.duration, "duration", 5*time.Second, "measuring time")
	fl.BoolVar(&o.load, "load", false, "write the workload's records first (farm: create the database)")
	fl.BoolVar(&o.check, "check", false, "check serializability (and SmallBank's money) of the run; needs --load")
	return cmd
}

// benchTxn loads (with o.load) and runs wl on db and prints the report;
// with o.check it checks the history and, when money is not nil, the
// workload's invariant.
func benchTxn[O any](ctx context.Context, w io.Writer, db txn.DB, trips txnCounters, o txnBenchOptions, wl workload.TxnWorkload[O],
	load func(context.Context, txn.DB, workload.TxnLoad) error,
	money func(context.Context, *workload.TxnResult) (string, error)) error {
	var hist *check.History
	if o.check {
		hist = check.NewHistory()
	}
	if o.load {
		lc := workload.TxnLoad{Threads: min(o.clients, 8)}
		if hist != nil {
			lc.Trace = hist.Add
		}
		t0 := time.Now()
		if err := load(ctx, db, lc); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		fmt.Fprintf(w, "loaded        in %v\n", time.Since(t0).Round(time.Millisecond))
	}
	run := workload.TxnRun{Threads: o.clients, Duration: o.duration}
	if hist != nil {
		run.Trace = hist.Add
	}
	c0, t0 := trips()
	res, err := workload.RunTxn(ctx, run, wl, db)
	if err != nil {
		return err
	}
	c1, t1 := trips()
	printTxnResult(w, res, float64(t1-t0)/float64(max(c1-c0, 1)))
	if hist == nil {
		return nil
	}
	if err := hist.Check(); err != nil {
		fmt.Fprintf(w, "serializable  NO: %v\n", err)
		return err
	}
	fmt.Fprintf(w, "serializable  yes: no cycle among %d committed transactions (%d of them loading)\n", hist.Len(), hist.Len()-int(res.Committed))
	if money == nil {
		return nil
	}
	verdict, err := money(ctx, res)
	if err != nil {
		fmt.Fprintf(w, "money         WRONG: %v\n", err)
		return err
	}
	fmt.Fprintf(w, "money         %s\n", verdict)
	return nil
}

// printTxnResult prints a run's figures, one per line, trips being the
// round trips per committed transaction.
func printTxnResult(w io.Writer, res *workload.TxnResult, trips float64) {
	fmt.Fprintf(w, "committed     %.0f txn/s (%d in %v; %d rejected by their own logic)\n",
		res.Rate(), res.Committed, res.Elapsed.Round(time.Millisecond), res.Rejected)
	fmt.Fprintf(w, "latency       p50 %.1f µs, p99 %.1f µs (committed transactions, retries included)\n",
		float64(res.P50)/1e3, float64(res.P99)/1e3)
	var why []string
	for r := txn.LockConflict; r <= txn.UserAbort; r++ {
		why = append(why, fmt.Sprintf("%v %d", r, res.Aborts[r]))
	}
	fmt.Fprintf(w, "aborts        %.3f per committed transaction (%s)\n", res.AbortRate(), strings.Join(why, ", "))
	fmt.Fprintf(w, "round trips   %.2f per committed transaction\n", trips)
	if res.Unknown+res.Failed > 0 {
		fmt.Fprintf(w, "failed        %d of unknown outcome, %d others (first: %v)\n", res.Unknown, res.Failed, res.FirstErr)
	}
}
