// Package rsexp holds the replicated block store's experiments, which
// register with the bench harness: rs-ycsb runs YCSB A, B and C over
// block ids (4 KiB blocks, n = 3 replicas, keys uniform and zipfian
// 0.99, 1, 8 and 32 clients) against every system of its list, in one
// run, with etcd as the peer (bench/peers.StartEtcd,
// bench/peers.EtcdBlocks), and reports throughput, p50, p99, read and
// write medians, round trips and replica CPU per operation, and each
// row's ratios to etcd's; a note compares every two other systems at 32
// clients (the first listed against the second: rate, read and write
// medians, replica CPU).
//
// A system is a name and a start function (system.go): start brings up
// the replicas for the volume it is given and returns a deployment —
// how the clients reach them (transport), the replicas' process ids
// (their CPU is replica_cpu), open (a new blockstore.Store client; one
// per client goroutine; a client with a RoundTrips() uint64 method has
// its round trips reported) and stop (ends the replicas, removes their
// state; always called). Adding a system is a start function in a file
// of its own and one entry in the systems list. A start that cannot run
// on this machine (a missing program: peers.ErrNotInstalled, or no way
// to run the rdmakit command: bench.ErrNoCommand, or errUnavailable)
// leaves the system out with its reason in the notes.
//
// Import the package for its side effect to make its experiments
// runnable through bench.Run (the rdmakit command does).
package rsexp
