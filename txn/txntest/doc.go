// Package txntest helps test transaction protocols: Run is the
// conformance suite every txn.DB must pass (read-your-writes, missing
// and existing keys, aborts and failed commits that leave nothing,
// limits, lost-update freedom under concurrency, SmallBank and TATP runs
// whose traces the serializability checker accepts and whose money adds
// up, cancellation, Close under load), and MemDB is an in-process
// serializable txn.DB — with a switch that makes it not serializable,
// the checker's negative control.
//
// A protocol's test calls the suite with a constructor of empty
// databases:
//
//	func TestConformance(t *testing.T) {
//		txntest.Run(t, func(t *testing.T) txn.DB { return newCluster(t).Client() })
//	}
package txntest
