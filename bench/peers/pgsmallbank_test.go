package peers

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// smallBankDump reads PostgreSQL's SmallBank back as the workload's
// records (keys and values).
func smallBankDump(t *testing.T, db *PGTxn) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, q := range []struct {
		sql string
		key func(uint64) []byte
	}{{"SELECT custid, bal FROM savings", workload.SavingsKey}, {"SELECT custid, bal FROM checking", workload.CheckingKey}} {
		rows, err := db.Pool().Query(t.Context(), q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, bal int64
			if err := rows.Scan(&id, &bal); err != nil {
				t.Fatal(err)
			}
			out[string(q.key(uint64(id)))] = binary.BigEndian.AppendUint64(nil, uint64(bal))
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
	}
	rows, err := db.Pool().Query(t.Context(), "SELECT custid, name FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			t.Fatal(err)
		}
		out[string(workload.AccountKey(uint64(id)))] = []byte(name)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

// balance reads one balance ("savings" or "checking").
func balance(t *testing.T, db *PGTxn, table string, id int64) int64 {
	t.Helper()
	var bal int64
	if err := db.Pool().QueryRow(t.Context(), "SELECT bal FROM "+table+" WHERE custid = $1", id).Scan(&bal); err != nil {
		t.Fatal(err)
	}
	return bal
}

func TestPGSmallBank(t *testing.T) {
	needPostgres(t)
	db := startPGTxn(t, 8)
	ctx := t.Context()

	t.Run("kinds", func(t *testing.T) {
		w := &workload.SmallBank{Accounts: 10, InitialBalance: 1000}
		b, err := LoadPGSmallBank(ctx, db, w)
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			op       workload.SmallBankOp
			delta    int64
			rejected bool
			sav, chk [2]int64 // customers 1 and 2 after the step
		}{
			{workload.SmallBankOp{Kind: workload.Balance, Cust1: 1}, 0, false, [2]int64{1000, 1000}, [2]int64{1000, 1000}},
			{workload.SmallBankOp{Kind: workload.DepositChecking, Cust1: 1, Amount: 130}, 130, false, [2]int64{1000, 1000}, [2]int64{1130, 1000}},
			{workload.SmallBankOp{Kind: workload.TransactSavings, Cust1: 2, Amount: 2020}, 2020, false, [2]int64{1000, 3020}, [2]int64{1130, 1000}},
			{workload.SmallBankOp{Kind: workload.SendPayment, Cust1: 1, Cust2: 2, Amount: 500}, 0, false, [2]int64{1000, 3020}, [2]int64{630, 1500}},
			{workload.SmallBankOp{Kind: workload.SendPayment, Cust1: 1, Cust2: 2, Amount: 700}, 0, true, [2]int64{1000, 3020}, [2]int64{630, 1500}},
			{workload.SmallBankOp{Kind: workload.Amalgamate, Cust1: 1, Cust2: 2}, 0, false, [2]int64{0, 3020}, [2]int64{0, 3130}},
			{workload.SmallBankOp{Kind: workload.WriteCheck, Cust1: 2, Amount: 500}, -500, false, [2]int64{0, 3020}, [2]int64{0, 2630}},
			{workload.SmallBankOp{Kind: workload.WriteCheck, Cust1: 1, Amount: 500}, -501, false, [2]int64{0, 3020}, [2]int64{-501, 2630}},
		}
		var committed int64
		for i, s := range steps {
			d, err := b.Exec(ctx, nil, s.op)
			if rej := errors.Is(err, workload.ErrRejected); rej != s.rejected || err != nil && !rej || d != s.delta {
				t.Fatalf("step %d %v: delta %d, %v; want %d, rejected %v", i, s.op.Kind, d, err, s.delta, s.rejected)
			}
			committed += d
			for c := range 2 {
				if sav, chk := balance(t, db, "savings", int64(c+1)), balance(t, db, "checking", int64(c+1)); sav != s.sav[c] || chk != s.chk[c] {
					t.Fatalf("step %d %v: customer %d holds %d + %d, want %d + %d", i, s.op.Kind, c+1, sav, chk, s.sav[c], s.chk[c])
				}
			}
		}
		if err := b.CheckMoney(ctx, &workload.TxnResult{Delta: committed}); err != nil {
			t.Fatal(err)
		}
		if st := db.Stats(); st.Rejected != 1 || st.Commits < uint64(len(steps)-1) {
			t.Errorf("stats %+v: want 1 rejection and %d commits", st, len(steps)-1)
		}
		// A statement sent alone is a serializable transaction too.
		var iso string
		if err := db.Pool().QueryRow(ctx, "SELECT current_setting('transaction_isolation')").Scan(&iso); err != nil || iso != "serializable" {
			t.Errorf("a statement alone runs at %q (%v), want serializable", iso, err)
		}
		if _, err := b.Exec(ctx, nil, workload.SmallBankOp{Kind: workload.DepositChecking, Cust1: 99, Amount: 1}); !errors.Is(err, ErrPGMissingRow) {
			t.Errorf("deposit to a customer not loaded: %v, want ErrPGMissingRow", err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Exec(done, nil, workload.SmallBankOp{Kind: workload.DepositChecking, Cust1: 1, Amount: 1}); !errors.Is(err, context.Canceled) {
			t.Errorf("a deposit with an ended context: %v, want context.Canceled", err)
		}
		if got := balance(t, db, "checking", 1); got != -501 {
			t.Errorf("a deposit with an ended context left checking at %d", got)
		}
		for _, op := range []workload.SmallBankOp{{Kind: 42}, {Kind: workload.SendPayment, Cust1: 3, Cust2: 3}, {Kind: workload.DepositChecking, Amount: -1}} {
			if _, err := b.Exec(ctx, nil, op); err == nil {
				t.Errorf("operation %+v ran", op)
			}
		}
	})

	// The same operations on the workload's own Exec (over a trivially
	// serializable store) and on PostgreSQL give the same deltas, the
	// same rejections and the same records.
	t.Run("like-for-like", func(t *testing.T) {
		w := &workload.SmallBank{Accounts: 40, HotAccounts: 4, InitialBalance: 2000}
		b, err := LoadPGSmallBank(ctx, db, w)
		if err != nil {
			t.Fatal(err)
		}
		ref := txntest.NewMemDB()
		if err := w.Load(ctx, ref, workload.TxnLoad{}); err != nil {
			t.Fatal(err)
		}
		var keys [][]byte
		for id := range uint64(w.NumAccounts()) {
			keys = append(keys, workload.AccountKey(id), workload.SavingsKey(id), workload.CheckingKey(id))
		}
		sameData(t, readAll(t, ref, keys), smallBankDump(t, db))
		committed, rejected := sameOutcome(t, w, draw(w, 1500, 3),
			func(ctx context.Context, op workload.SmallBankOp) (int64, error) { return w.Exec(ctx, ref, op) },
			func(ctx context.Context, op workload.SmallBankOp) (int64, error) { return b.Exec(ctx, nil, op) })
		sameData(t, readAll(t, ref, keys), smallBankDump(t, db))
		for k, name := range w.Kinds() {
			if committed[k] == 0 {
				t.Errorf("no %s committed", name)
			}
		}
		if rejected[workload.SendPayment] == 0 {
			t.Error("no SendPayment rejected: the test does not reach that path")
		}
		t.Logf("committed %v, rejected %v", committed, rejected)
	})

	// Eight clients on ten hot accounts: SSI aborts some, they are run
	// again, and the money adds up.
	t.Run("concurrent", func(t *testing.T) {
		w := &workload.SmallBank{Accounts: 1000, HotAccounts: 10}
		b, err := LoadPGSmallBank(ctx, db, w)
		if err != nil {
			t.Fatal(err)
		}
		before := db.Stats()
		res, err := workload.RunTxnFunc(ctx, workload.TxnRun{Threads: 8, Duration: 2 * time.Second, Seed: 11}, w, b.Exec)
		if err != nil {
			t.Fatal(err)
		}
		st := db.Stats()
		t.Logf("%d committed (%.0f/s), %d rejected, aborts %v (server: %d serialization failures, %d deadlocks), p50 %v p99 %v",
			res.Committed, res.Rate(), res.Rejected, res.Aborts, st.SerializationFailures-before.SerializationFailures, st.Deadlocks-before.Deadlocks, res.P50, res.P99)
		if res.Failed != 0 || res.Unknown != 0 {
			t.Fatalf("%d failed, %d unknown: %v", res.Failed, res.Unknown, res.FirstErr)
		}
		if res.Committed == 0 {
			t.Fatal("nothing committed")
		}
		if err := b.CheckMoney(ctx, res); err != nil {
			t.Fatal(err)
		}
		if res.Aborts[txn.ValidationFailed] == 0 || st.SerializationFailures == before.SerializationFailures {
			t.Errorf("no serialization failure retried under hot-account skew (aborts %v)", res.Aborts)
		}
		if got := uint64(res.Aborts[txn.ValidationFailed] + res.Aborts[txn.LockConflict]); got != st.Aborts()-before.Aborts() {
			t.Errorf("the sessions counted %d aborts, the pool %d", got, st.Aborts()-before.Aborts())
		}
		// The check fails when money appears from nowhere.
		if _, err := db.Pool().Exec(ctx, "UPDATE savings SET bal = bal + 1 WHERE custid = 0"); err != nil {
			t.Fatal(err)
		}
		var me *workload.MoneyError
		if err := b.CheckMoney(ctx, res); !errors.As(err, &me) || me.Total != me.Want+1 {
			t.Errorf("CheckMoney after a cent appeared: %v, want a MoneyError off by 1", err)
		}
	})
}
