// Package sockexp holds the experiments of rdmakit's sockets over
// remote memory (package sock, NT.Sockets), which register with the
// bench harness, and the servers they measure:
//
//   - sock-latency: ping-pong round trips of 64 B to 64 KiB (p50, p99,
//     mean) over sock next to Go's loopback TCP, Unix domain sockets and
//     sockperf's TCP ping-pong (busy-polling and blocking).
//   - sock-throughput: bulk one-way writes of 4 KiB to 1 MiB per Write
//     call over one and eight connections, in GB/s.
//   - sock-http: a net/http hello-world server on the system's listener
//     and an http.Client whose Transport dials the system, at 1, 8 and
//     32 concurrent keep-alive clients: requests per second, p50, p99.
//   - sock-isolation (isolation.go): a latency flow of 64 B round trips,
//     p50, p99 and p99.9, alone and next to a bulk flow of 1 MiB Writes
//     on a second connection to the same server (the thesis' isolation
//     and head-of-line figures): sock/shm with both connections in one
//     partition, slicing and batch limits on (the defaults) and off
//     (slicing=0&batch=-1), and in two partitions (checked with
//     Conn.Partition); Go's loopback TCP; and next to 1,000 idle
//     connections (sock's default configuration and TCP). Each row has
//     the bulk flow's GB/s and p99 over the same setup's p99 alone.
//
// Each notes the ratios the sock package is judged by: p50 against TCP
// and against Unix sockets at 64 B, throughput against TCP with 64 KiB
// writes on one connection, requests per second against TCP at each
// concurrency, p99 next to a bulk flow against p99 alone — always within
// the same run.
//
// A system is a network (system.go): Go's net package over loopback TCP
// ("net/tcp") or an abstract Unix socket ("net/unix"), and the sock
// systems sockNets returns (sock.go: "sock/shm" in Direct and SPSC mode,
// "sock/tcp" in Direct mode); bench.Options.Only
// selects them by these names, "sockperf" or "sockperf/tcp" the
// sockperf rows. Every system's server is `rdmakit sock serve` in its
// own process (server.go), started through bench.Options.Command and
// announcing the URI it listens on; the client runs in the experiment's
// process. Systems are measured one at a time, each server stopped
// before the next starts.
//
// Servers and clients name where they meet by URI (uri.go):
// net+tcp://HOST:PORT, net+unix:///PATH or net+unix://@NAME for the
// baselines, tcp://HOST:PORT and shm://NAME for sock, with an optional
// query setting the sock.Config (shm://web?mode=spsc: sock.go); the sock
// clients of one configuration share one sock.Dialer, so their
// connections share its links as a sock application's would. ServeURI is the
// body of `rdmakit sock serve`: it listens, says where, and runs an App
// (serve.go) — Echo, Sink (batches acknowledged with one byte), HTTP or
// Mux (each connection's first byte picks Echo or Sink) — until its
// context ends.
//
// The measuring loops allocate nothing per round trip or Write: buffers
// are allocated before a point, round trips are read with io.ReadFull
// and timed with time.Now into a preallocated bench/stats.Latencies.
// Every point runs a warm-up of a tenth of its time first, on a fresh
// connection (or HTTP client); full runs measure three rounds and report
// medians with their spread, quick runs one.
//
// Import the package for its side effect to make its experiments
// runnable through bench.Run (the rdmakit command does).
package sockexp
