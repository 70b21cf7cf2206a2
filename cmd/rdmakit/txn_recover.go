package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/txn/ford"
)

// errRecoverWhat: `txn recover` was given nothing to recover.
var errRecoverWhat = fmt.Errorf("%w: give --coordinator ID, --sweep or both", errTxnFlag)

func newTxnRecoverCmd() *cobra.Command {
	var f txnClientFlags
	coordinator := -1
	var sweep bool
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Recover a dead FORD client: roll its logged transaction forward, free its coordinator id, release expired locks",
		Long: `recover repairs what a FORD client that died (kill -9, a crash, a lost host)
left in the database, one-sided like everything FORD does; the memory nodes
do nothing. Live clients repair the same on their own when they meet an
expired lock; recover is for the locks nobody meets and for the coordinator
ids a dead client claimed.

--coordinator ID recovers coordinator ID (a dead client's; 'txn client'
reports its ids): a transaction complete in its log is rolled forward (its
new images written on every copy it still locks, the locks released), and
the id is freed for new clients. It waits out the transaction's lease (at
most 1 s) when that is not over yet. Locks the coordinator took without
logging (it died before its log WRITE) are not in its log: --sweep finds
them.

--sweep reads every slot of every copy and recovers each lock whose lease is
over: rolled forward when its owner's log holds the transaction, released
otherwise. Locks under a live lease are counted and left alone — but with
--coordinator, that coordinator's are waited out (at most its 1 s lease) and
recovered: it is dead.

Give the layout flags the nodes were given.`,
		Example: `  rdmakit txn recover --protocol ford --nodes A,B,C --coordinator 17
  rdmakit txn recover --protocol ford --nodes A,B,C --sweep
  rdmakit txn recover --protocol ford --nodes A,B,C --coordinator 17 --sweep --buckets 8192`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if f.protocol != protoFord {
				if err := checkProtocol(f.protocol); err != nil {
					return err
				}
				return fmt.Errorf("%w: --protocol %s: recover is for ford (FaRM's nodes recover their clients themselves; PRISM-TX's transactions are decided by their timestamps)", errTxnFlag, f.protocol)
			}
			if coordinator < 0 && !sweep {
				return errRecoverWhat
			}
			db, _, err := f.open(ctx, 0)
			if err != nil {
				return err
			}
			defer db.Close()
			return recoverFord(ctx, cmd.OutOrStdout(), db.(*ford.DB), coordinator, sweep)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.IntVar(&coordinator, "coordinator", -1, "the dead coordinator's id to recover (-1: none)")
	fl.BoolVar(&sweep, "sweep", false, "recover every expired lock of the database")
	return cmd
}

// recoverFord recovers coordinator id (when ≥ 0; waiting out its lease)
// and then, with sweep, every expired lock, and says what it did.
func recoverFord(ctx context.Context, w io.Writer, db *ford.DB, id int, sweep bool) error {
	if id >= 0 {
		r, err := recoverCoordinator(ctx, w, db, id)
		if err != nil {
			return fmt.Errorf("recover coordinator %d: %w", id, err)
		}
		switch {
		case r.Logged && r.Copies > 0:
			fmt.Fprintf(w, "coordinator %d: its logged transaction rolled forward: %d copies written and unlocked\n", id, r.Copies)
		case r.Logged:
			fmt.Fprintf(w, "coordinator %d: its logged transaction was installed already (by its commit or a recovery)\n", id)
		default:
			fmt.Fprintf(w, "coordinator %d: no transaction in its log\n", id)
		}
		if r.Freed {
			fmt.Fprintf(w, "coordinator %d: id freed\n", id)
		} else {
			fmt.Fprintf(w, "coordinator %d: id was not claimed\n", id)
		}
	}
	if !sweep {
		return nil
	}
	sweepFn := db.Sweep
	if id >= 0 {
		// The coordinator's locks too, once their leases are over.
		sweepFn = func(ctx context.Context) (ford.Swept, error) { return db.SweepCoordinator(ctx, id) }
	}
	s, err := sweepFn(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	st := db.Stats()
	fmt.Fprintf(w, "sweep: %d expired locks recovered (%d transactions rolled forward, %d rolled back), %d locks under a live lease left alone\n",
		s.Recovered, st.RolledForward, st.RolledBack, s.Live)
	return nil
}

// recoverCoordinator is db.Recover(id), retried once the lease of the
// transaction in its log is over.
func recoverCoordinator(ctx context.Context, w io.Writer, db *ford.DB, id int) (ford.Recovered, error) {
	for waited := false; ; waited = true {
		r, err := db.Recover(ctx, id)
		if !errors.Is(err, ford.ErrLeaseLive) {
			return r, err
		}
		if !waited {
			fmt.Fprintf(w, "coordinator %d: its transaction's lease is not over (%v); waiting\n", id, err)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(ford.MaxLease / 10):
		}
	}
}
