package workload_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// near asserts share is within tol of want.
func near(t *testing.T, what string, share, want, tol float64) {
	t.Helper()
	if math.Abs(share-want) > tol {
		t.Errorf("%s: %.4f, want %.4f ± %.4f", what, share, want, tol)
	}
}

// TestSmallBankNext: the standard mix, 90% of transactions on the 4,000
// hot customers of 100,000, two distinct customers where two are used,
// FORD's amounts.
func TestSmallBankNext(t *testing.T) {
	sb := &workload.SmallBank{}
	r := rand.New(rand.NewSource(1))
	const n = 200_000
	var kinds [6]int
	hot := 0
	for range n {
		op := sb.Next(r)
		kinds[op.Kind]++
		if op.Cust1 >= 100_000 || op.Cust2 >= 100_000 {
			t.Fatalf("%+v: customer out of range", op)
		}
		two := op.Kind == workload.Amalgamate || op.Kind == workload.SendPayment
		if two && op.Cust1 == op.Cust2 || !two && op.Cust2 != 0 {
			t.Fatalf("%+v: wrong customers", op)
		}
		if op.Cust1 < 4000 && (!two || op.Cust2 < 4000) {
			hot++
		}
		want := map[workload.SmallBankKind]int64{workload.DepositChecking: 130, workload.SendPayment: 500,
			workload.TransactSavings: 2020, workload.WriteCheck: 500}[op.Kind]
		if op.Amount != want {
			t.Fatalf("%+v: amount, want %d", op, want)
		}
	}
	for k, want := range []float64{0.15, 0.15, 0.15, 0.25, 0.15, 0.15} {
		near(t, workload.SmallBankKind(k).String(), float64(kinds[k])/n, want, 0.005)
	}
	// 90% hot, plus the cold draws that land on hot customers (60% of
	// transactions use one customer, 40% two).
	near(t, "hot share", float64(hot)/n, 0.9+0.1*(0.6*0.04+0.4*0.04*0.04), 0.005)
	if got := sb.Kinds(); len(got) != 6 || got[workload.WriteCheck] != "WriteCheck" {
		t.Fatalf("Kinds() = %v", got)
	}
}

// bank is a loaded SmallBank of three customers with 1,000 cents in each
// balance, on a MemDB.
func bank(t *testing.T) (*workload.SmallBank, txn.DB) {
	sb := &workload.SmallBank{Accounts: 3, InitialBalance: 1000}
	db := txntest.NewMemDB()
	if err := sb.Load(context.Background(), db, workload.TxnLoad{Batch: 2}); err != nil {
		t.Fatal(err)
	}
	return sb, db
}

// balances reads customer id's savings and checking.
func balances(t *testing.T, db txn.DB, id uint64) (sav, chk int64) {
	t.Helper()
	err := txn.Run(context.Background(), db, func(tx txn.Tx) error {
		s, err := tx.Get(workload.SavingsKey(id))
		if err != nil {
			return err
		}
		c, err := tx.Get(workload.CheckingKey(id))
		if err != nil {
			return err
		}
		sav, chk = int64(binary.BigEndian.Uint64(s)), int64(binary.BigEndian.Uint64(c))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sav, chk
}

// TestSmallBankExec: each transaction's effect and money delta, the
// rejected SendPayment, WriteCheck's penalty, the money check.
func TestSmallBankExec(t *testing.T) {
	sb, db := bank(t)
	ctx := context.Background()
	var total int64
	for i, c := range []struct {
		op        workload.SmallBankOp
		delta     int64
		rejected  bool
		id        uint64
		sav, chk  int64
		id2, chk2 int64
	}{
		{op: workload.SmallBankOp{Kind: workload.DepositChecking, Cust1: 0, Amount: 130}, delta: 130, id: 0, sav: 1000, chk: 1130},
		{op: workload.SmallBankOp{Kind: workload.TransactSavings, Cust1: 0, Amount: 2020}, delta: 2020, id: 0, sav: 3020, chk: 1130},
		{op: workload.SmallBankOp{Kind: workload.Amalgamate, Cust1: 0, Cust2: 1}, id: 0, sav: 0, chk: 0, id2: 1, chk2: 5150},
		{op: workload.SmallBankOp{Kind: workload.SendPayment, Cust1: 0, Cust2: 1, Amount: 500}, rejected: true, id: 0, id2: 1, chk2: 5150},
		{op: workload.SmallBankOp{Kind: workload.SendPayment, Cust1: 1, Cust2: 2, Amount: 500}, id: 1, sav: 1000, chk: 4650, id2: 2, chk2: 1500},
		{op: workload.SmallBankOp{Kind: workload.WriteCheck, Cust1: 0, Amount: 500}, delta: -501, id: 0, chk: -501},
		{op: workload.SmallBankOp{Kind: workload.WriteCheck, Cust1: 2, Amount: 500}, delta: -500, id: 2, sav: 1000, chk: 1000},
		{op: workload.SmallBankOp{Kind: workload.Balance, Cust1: 1}, id: 1, sav: 1000, chk: 4650},
	} {
		delta, err := sb.Exec(ctx, db, c.op)
		if c.rejected != errors.Is(err, workload.ErrRejected) || !c.rejected && err != nil {
			t.Fatalf("%d %v: %v (rejection expected: %v)", i, c.op.Kind, err, c.rejected)
		}
		if delta != c.delta {
			t.Fatalf("%d %v: delta %d, want %d", i, c.op.Kind, delta, c.delta)
		}
		total += delta
		if sav, chk := balances(t, db, c.id); sav != c.sav || chk != c.chk {
			t.Fatalf("%d %v: customer %d holds %d + %d, want %d + %d", i, c.op.Kind, c.id, sav, chk, c.sav, c.chk)
		}
		if c.id2 != 0 {
			if _, chk := balances(t, db, uint64(c.id2)); chk != c.chk2 {
				t.Fatalf("%d %v: customer %d's checking %d, want %d", i, c.op.Kind, c.id2, chk, c.chk2)
			}
		}
	}
	if got, err := sb.Total(ctx, db); err != nil || got != 6000+total {
		t.Fatalf("total %d (%v), want %d", got, err, 6000+total)
	}
	if err := sb.CheckMoney(ctx, db, &workload.TxnResult{Delta: total}); err != nil {
		t.Fatal(err)
	}
	var me *workload.MoneyError
	if err := sb.CheckMoney(ctx, db, &workload.TxnResult{Delta: total + 1}); !errors.As(err, &me) || me.Total != 6000+total {
		t.Fatalf("money off by one cent: %v", err)
	}
	// An operation Next never draws is an error, not a rejection.
	if _, err := sb.Exec(ctx, db, workload.SmallBankOp{Kind: workload.SendPayment, Cust1: 1, Cust2: 1, Amount: 1}); err == nil || errors.Is(err, workload.ErrRejected) {
		t.Fatalf("payment to oneself: %v", err)
	}
	// A customer with no records is an error too.
	if _, err := sb.Exec(ctx, db, workload.SmallBankOp{Kind: workload.Balance, Cust1: 9}); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("unknown customer: %v", err)
	}
}

// TestSmallBankTiny: a bank of one customer draws no two-customer
// transaction Exec would run, and does not panic.
func TestSmallBankTiny(t *testing.T) {
	sb := &workload.SmallBank{Accounts: 1, InitialBalance: 10}
	db := txntest.NewMemDB()
	ctx := context.Background()
	if err := sb.Load(ctx, db, workload.TxnLoad{}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	for range 100 {
		op := sb.Next(r)
		_, err := sb.Exec(ctx, db, op)
		two := op.Kind == workload.Amalgamate || op.Kind == workload.SendPayment
		if two != (err != nil && !errors.Is(err, workload.ErrRejected)) {
			t.Fatalf("%+v: %v", op, err)
		}
	}
}
