package workload_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// ExampleRunTxn loads a small SmallBank into a transactional database
// (here txntest.MemDB; a protocol's client works the same), runs it from
// 4 goroutines for 100 ms with every committed transaction's trace
// recorded, then checks the history for serializability and the bank's
// money against the committed deposits and withdrawals.
func ExampleRunTxn() {
	ctx := context.Background()
	db := txntest.NewMemDB()
	sb := &workload.SmallBank{Accounts: 1000, HotAccounts: 10}
	h := check.NewHistory()
	if err := sb.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
		log.Fatal(err)
	}
	res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 4, Duration: 100 * time.Millisecond, Trace: h.Add}, sb, db)
	if err != nil {
		log.Fatal(err)
	}
	// A real run reports res.Rate() committed transactions per second,
	// res.P50, res.P99, res.AbortRate() and res.Aborts by reason.
	fmt.Println("committed:", res.Committed > 0, "failed:", res.Failed)
	fmt.Println("serializable:", h.Check())
	fmt.Println("money:", sb.CheckMoney(ctx, db, res))
	// Output:
	// committed: true failed: 0
	// serializable: <nil>
	// money: <nil>
}

// ExampleSmallBank_Next draws SmallBank transactions: plain values that a
// SQL peer can run as well as Exec runs them on a txn.DB.
func ExampleSmallBank_Next() {
	sb := &workload.SmallBank{Accounts: 100, HotAccounts: 100}
	op := workload.SmallBankOp{Kind: workload.SendPayment, Cust1: 3, Cust2: 8, Amount: 500}
	fmt.Printf("%v from %d to %d: %d cents\n", op.Kind, op.Cust1, op.Cust2, op.Amount)
	fmt.Printf("keys %s and %s\n", workload.CheckingKey(op.Cust1), workload.CheckingKey(op.Cust2))
	fmt.Println(sb.Kinds())
	// Output:
	// SendPayment from 3 to 8: 500 cents
	// keys sb.chk/3 and sb.chk/8
	// [Amalgamate Balance DepositChecking SendPayment TransactSavings WriteCheck]
}
