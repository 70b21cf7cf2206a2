// Package objexp holds the object store's experiments (package
// objstore), which register with the bench harness:
//
//   - objstore-fetch (fetch.go; the Plasma thesis' §4 benchmark): two
//     stores in their own processes, a holder and a fetcher; a bench
//     client creates a pool of distinct objects of each size at the
//     holder and has the fetcher's client fetch them in random order
//     after 10 warm-up fetches, deleting the fetched copy after each
//     fetch. Rows per protocol — TCP4K (Plasma's original 4 KB socket
//     path), TCPBulk, SendRecv only, Read only, Hybrid — and Redis GET of
//     the same sizes (redis-server started by the experiment, values SET
//     first): latency per object (mean, p50), GB/s, bytes copied in user
//     space per object (from the stores' transfer counters) and CPU per
//     object (both stores' processes, or redis-server's).
//   - objstore-local (local.go): one store process and a local client:
//     create+seal, create+copy+seal and get latency by size, 1 KiB to
//     64 MiB, p50 and p99; the note gives get(64 MiB)/get(1 KiB).
//
// Every store is `rdmakit objstore serve` (package objstore/node) in its
// own process, started through bench.Options.Command; it announces its
// socket, peer addresses and /stats endpoint in one line (process.go).
// The clients run in the experiment's process. A full run measures every
// point three times and reports medians and the spread of the rounds;
// a quick run (Options.Quick) measures once, fewer objects and sizes, in
// a few seconds.
package objexp
