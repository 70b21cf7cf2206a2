// Package txnexp holds the distributed transactions' experiments, which
// register with the bench harness:
//
//   - txn-ycsbt (PRISM's Fig. 10): PRISM-TX and FORD next to FaRM on YCSB-T
//     (read-modify-write transactions of 1 to 4 keys) over tcp, keys drawn
//     by zipf 0.5 to 0.99: committed throughput and median latency against
//     skew, with p99, aborts, round trips and node CPU per transaction.
//   - txn-peers: SmallBank and TATP on every protocol next to PostgreSQL 15
//     at SERIALIZABLE (bench/peers.StartPostgres), 8 and 32 clients:
//     throughput, p50, p99, aborted attempts per committed transaction,
//     round trips and node CPU per committed transaction, each row's rate
//     against PostgreSQL's; FaRM, PRISM-TX and FORD each over tcp and shm.
//     A note per transport gives FORD's commit round trips on SmallBank
//     (mean after execution, the most: its bound is 3) and its rate
//     against FaRM's.
//
// Each experiment measures one system at a time (alone.go): a system's
// servers start and its workloads load before its points, and it is
// stopped, its client closed and its histories dropped (the heap
// collected) before the next system starts, so no idle system's
// processes or garbage share the cores with the one measured; txn-smart
// does the same per transport, its series sharing a transport's nodes.
//
// A system is a name and a start function (system.go). rdmakit's
// protocols run as three `rdmakit txn serve` memory nodes, each its own
// process started by bench.StartServer on a tcp device that parks when
// idle (spin=0s), reached by one client (a txn.DB shared by every client
// goroutine) in the experiment's process; PostgreSQL is started by the
// experiment and left out, with the reason in the notes, when it is not
// installed. Node CPU is the servers' processes' CPU time from /proc
// (bench.ProcCPU).
//
// Every run is checked, not trusted: every committed transaction's trace
// (txn.Traced: the version of each record read and written), loading
// included, goes into one check.History per system and workload, and
// check.Serializable runs on it after every point: a cycle, or a version
// read that no committed transaction wrote, fails the run. SmallBank's
// money invariant (workload.SmallBank.CheckMoney; peers.PGSmallBank's
// for PostgreSQL, whose transactions are not traced) is checked after each
// system's SmallBank points and fails the run when it does not hold.
//
// Import the package for its side effect to make its experiments
// runnable through bench.Run (the rdmakit command does).
package txnexp
