package check_test

import (
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
)

// ExampleSerializable checks two histories of committed transactions
// as protocols trace them (txn.Traced): the version of every record read
// and the version each write installed. In a real test,
// check.History.Add is workload.TxnRun's Trace.
func ExampleSerializable() {
	x1 := txn.Access{Key: "x", Version: 1}
	// Two increments of x in a row: T1 read the version T0 installed.
	h := []check.Txn{
		{Writes: []txn.Access{x1}},
		{Reads: []txn.Access{x1}, Writes: []txn.Access{{Key: "x", Version: 2}}},
	}
	fmt.Println(check.Serializable(h))

	// A lost update: T1 and T2 both read version 1 and both wrote x.
	h = append(h, check.Txn{Reads: []txn.Access{x1}, Writes: []txn.Access{{Key: "x", Version: 3}}})
	err := check.Serializable(h)
	var cycle *check.CycleError
	if errors.As(err, &cycle) {
		fmt.Println(cycle.Class(), cycle.Txns())
	}
	fmt.Println(err)
	// Output:
	// <nil>
	// G2 [1 2]
	// check: not serializable: G2 cycle of 2 transactions (one of 1 cyclic components): T1 -ww("x")-> T2 -rw("x")-> T1
}
