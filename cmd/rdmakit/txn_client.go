package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// txnClientLine is one line of `txn client`'s output (JSON): what one of
// its goroutines (T) is about to do or has done. In order, per
// operation: Op (drawn), Commit (a Commit call starts, once per
// attempt), Reads and Writes (the trace of the attempt that committed,
// written as soon as Commit returned nil), then Done with Delta, or
// Rejected, or Err.
type txnClientLine struct {
	T        int                   `json:"t"`
	Op       *workload.SmallBankOp `json:"op,omitempty"`
	Commit   bool                  `json:"commit,omitempty"`
	Coord    *int                  `json:"coord,omitempty"` // FORD: the coordinator id committing
	Reads    []txn.Access          `json:"r,omitempty"`
	Writes   []txn.Access          `json:"w,omitempty"`
	Traced   bool                  `json:"traced,omitempty"`
	Done     bool                  `json:"done,omitempty"`
	Delta    int64                 `json:"delta,omitempty"`
	Rejected bool                  `json:"rejected,omitempty"`
	Err      string                `json:"err,omitempty"`
}

// lineWriter writes txnClientLines, one write each, from many
// goroutines.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first failed write: nobody reads the lines any more
}

func (lw *lineWriter) emit(l txnClientLine) {
	b, err := json.Marshal(l)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if err == nil && lw.err == nil {
		_, err = lw.w.Write(append(b, '\n'))
	}
	if err != nil && lw.err == nil {
		lw.err = err
	}
}

// failed returns the first error of a write, nil while they succeed.
func (lw *lineWriter) failed() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}

// threadKey is the context key of the goroutine a transaction runs for.
type threadKey struct{}

// reportingDB is a txn.DB whose transactions say when they start to
// commit and, once committed, what they read and wrote.
type reportingDB struct {
	txn.DB
	out *lineWriter
	// dieOnStop kills this process when a commit returns ford.ErrStopped
	// (its hook stopped it: --die-at).
	dieOnStop bool
}

func (d *reportingDB) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	t, _ := ctx.Value(threadKey{}).(int)
	return &reportingTx{Tx: tx, out: d.out, t: t, dieOnStop: d.dieOnStop}, nil
}

// reportingTx is a transaction of a reportingDB.
type reportingTx struct {
	txn.Tx
	out       *lineWriter
	t         int
	dieOnStop bool
}

func (x *reportingTx) Commit() error {
	l := txnClientLine{T: x.t, Commit: true}
	if c, ok := x.Tx.(interface{ Coordinator() int }); ok {
		id := c.Coordinator()
		l.Coord = &id
	}
	x.out.emit(l)
	if err := x.Tx.Commit(); err != nil {
		if x.dieOnStop && errors.Is(err, ford.ErrStopped) {
			die()
		}
		return err
	}
	if tr, ok := x.Tx.(txn.Traced); ok {
		r, w := tr.Trace()
		x.out.emit(txnClientLine{T: x.t, Reads: r, Writes: w, Traced: true})
	}
	return nil
}

func newTxnClientCmd() *cobra.Command {
	var f txnClientFlags
	var accounts, first, customers, threads int
	var seed int64
	var dieAt string
	var dieIn int
	cmd := &cobra.Command{
		Use:    "client",
		Short:  "Run SmallBank on a range of customers and report every transaction as a JSON line (for fault tests)",
		Hidden: true,
		Long: `client runs SmallBank transactions on customers --first to --first+--customers-1
of a bank of --accounts customers (loaded already) from --threads goroutines
until SIGINT or SIGTERM, after which each goroutine finishes the transaction it
runs. It writes a JSON line (txnClientLine) before each transaction, at each
commit attempt, with the trace of each committed one, and with its outcome: a
test that kills this process (kill -9) mid-commit knows what it had committed,
and what it was committing. FORD: each commit line carries the coordinator id;
--die-at STEP (locked, validated, logged, half-written, half-unlocked,
committed) makes the process kill itself (SIGKILL, as kill -9) where a commit
stops at STEP (ford.Config.Hook: at half-written and half-unlocked, once that
half has landed), from its --die-in'th read-write commit on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			switch {
			case customers < 2 || first < 0 || first+customers > accounts:
				return fmt.Errorf("%w: --first %d --customers %d: want at least 2 customers among the bank's %d", errTxnFlag, first, customers, accounts)
			case threads <= 0 || threads > 256:
				return fmt.Errorf("%w: --threads %d: want 1 to 256", errTxnFlag, threads)
			}
			if dieIn < 1 {
				return fmt.Errorf("%w: --die-in %d: want at least 1", errTxnFlag, dieIn)
			}
			if dieAt != "" {
				if f.protocol != protoFord {
					return fmt.Errorf("%w: --die-at is for --protocol ford", errTxnFlag)
				}
				step, err := fordStep(dieAt)
				if err != nil {
					return err
				}
				f.ford.hook = dieHook(step, dieIn)
			}
			db, _, err := f.open(ctx, 0)
			if err != nil {
				return err
			}
			defer db.Close()
			out := &lineWriter{w: cmd.OutOrStdout()}
			bank := &workload.SmallBank{Accounts: accounts, HotAccounts: accounts}
			draw := &workload.SmallBank{Accounts: customers, HotAccounts: customers}
			rdb := &reportingDB{DB: db, out: out, dieOnStop: dieAt != ""}
			var wg sync.WaitGroup
			for t := range threads {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewSource(seed + int64(t)))
					tctx := context.WithValue(context.WithoutCancel(ctx), threadKey{}, t)
					for ctx.Err() == nil && out.failed() == nil {
						op := draw.Next(r)
						op.Cust1 += uint64(first)
						if op.Kind == workload.Amalgamate || op.Kind == workload.SendPayment {
							op.Cust2 += uint64(first)
						}
						out.emit(txnClientLine{T: t, Op: &op})
						octx, cancel := context.WithTimeout(tctx, 30*time.Second)
						delta, err := bank.Exec(octx, rdb, op)
						cancel()
						switch {
						case err == nil:
							out.emit(txnClientLine{T: t, Done: true, Delta: delta})
						case errors.Is(err, workload.ErrRejected):
							out.emit(txnClientLine{T: t, Rejected: true})
						default:
							out.emit(txnClientLine{T: t, Err: err.Error()})
						}
					}
				}()
			}
			wg.Wait()
			if err := out.failed(); err != nil {
				return fmt.Errorf("txn client: writing its report: %w", err)
			}
			return nil
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.IntVar(&accounts, "accounts", 1000, "customers of the bank, as loaded")
	fl.IntVar(&first, "first", 0, "the first customer this client's transactions use")
	fl.IntVar(&customers, "customers", 1000, "how many customers from --first on they use")
	fl.IntVar(&threads, "threads", 1, "goroutines, one transaction at a time each")
	fl.Int64Var(&seed, "seed", 1, "seed of the transactions drawn")
	fl.StringVar(&dieAt, "die-at", "", "ford: kill this process (SIGKILL) when a commit reaches this step")
	fl.IntVar(&dieIn, "die-in", 1, "ford, with --die-at: from which read-write commit on (1: the first)")
	return cmd
}

// dieHook is a FORD hook that stops a commit at step, from the in'th
// read-write commit on (every one passes StepLocked first): ford leaves
// the commit there as a crash would (after writing half the copies, or
// unlocking half, for those steps) and Commit returns ford.ErrStopped,
// at which the reportingTx kills the process (die).
func dieHook(step ford.Step, in int) func(ford.Step) bool {
	var commits atomic.Int64
	return func(s ford.Step) bool {
		if s == ford.StepLocked {
			commits.Add(1)
		}
		return s != step || commits.Load() < int64(in)
	}
}

// die kills this process with SIGKILL: no deferred call, no flush, as
// kill -9 from outside.
func die() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
