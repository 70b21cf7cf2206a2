// Package peers finds, runs and parses the comparison programs that
// rdmakit's benchmarks measure side by side with its own transports:
// sockperf (TCP ping-pong over loopback) and UCX's ucx_perftest (UCP
// tests over UCX's tcp or posix shared-memory transport).
//
// Each peer runs as a server and a client child process, started with
// exec.CommandContext, bounded in time, talking over 127.0.0.1 only, and
// killed before the call returns. A peer whose binary is not on PATH
// yields an error wrapping ErrNotInstalled; install the peers with
// scripts/install-peers.sh (as root, on Debian).
//
// Servers that benchmarks measure against run the same way: memcached
// and Redis (StartMemcached, StartRedis; RedisTree, a btree.Tree on one
// Redis sorted set, the ordered-index peer), and etcd as a cluster of
// members on loopback (StartEtcd: three processes, data on tmpfs,
// --unsafe-no-fsync), with EtcdBlocks, a blockstore.Store on it; and
// PostgreSQL 15 (StartPostgres: initdb into a temporary directory, run as
// an unprivileged user, a unix socket only, no fsync), with the
// transaction workloads in SQL at SERIALIZABLE isolation on it (PGTxn,
// PGSmallBank, PGTATP, PGYCSBT: workload.TxnExec targets running the same
// operations as rdmakit's protocols).
//
// The parsers (ParseSockperf, ParseUCXPerftest) are pure functions of a
// program's output, separate from the process handling, so they are
// tested on captured real outputs without the programs installed.
//
// Units matter when comparing: sockperf prints one-way latency (half the
// round trip) unless run with --full-rtt, and ucx_perftest halves the
// round trip of its ping-pong tests (*_lat) but prints the whole
// operation time of one-at-a-time gets and atomics. The Result types
// here say explicitly which figures are round trips; see docs/peers.md.
package peers
