// Package workload drives stores with standard workloads.
//
// YCSB comes from go-ycsb (pinned v1.0.1): its core workload generates the
// operations and keys (uniform or scrambled zipfian 0.99), this package
// adapts a kv.Store to its DB interface (DB; BlockDB adapts a
// blockstore.Store, record N being block N), loads the records, and runs
// the operations from many goroutines for a while, measuring throughput
// and latency (YCSB).
//
// The transaction workloads run on a txn.DB: SmallBank (the six
// transactions, FORD's and Smart-DTX's mix and hot accounts), TATP (the
// seven transactions, 80% read-only, the spec's population and NURand
// subscriber ids) and YCSBT (read-modify-write transactions of 1 to 4
// keys, uniform or zipf). Each draws its transactions as plain values
// (SmallBankOp, TATPOp, YCSBTOp from Next), so that a peer that is not a
// txn.DB — PostgreSQL through SQL — runs exactly the same operations; Exec
// runs one on a txn.DB through txn.Run; Load populates a database in
// batched transactions. RunTxn runs a workload from many goroutines for a
// while and reports committed transactions per second, the latency of
// committed transactions (retries included), aborts by txn.Reason,
// rejections (ErrRejected: the transaction's own logic rolled it back),
// and the money SmallBank's committed transactions added, which
// SmallBank.CheckMoney compares with the bank's balances. With
// TxnRun.Trace (check.History.Add) every committed transaction's versions
// go to the serializability checker. RunTxnFunc runs the same operations
// on any other target (TxnExec).
//
// Record keys are a table name, a slash and decimal ids ("sb.chk/42",
// "tatp.cf/7/2/16", "ycsbt/99"); values are fixed-width binary layouts
// documented with each table.
package workload
