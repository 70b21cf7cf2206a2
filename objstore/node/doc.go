// Package node is an object-store process as a library: the body of
// `rdmakit objstore serve`, which the command, the benchmarks
// (bench/objexp) and tests run.
//
// A node is an objstore.Store serving local clients on a Unix domain
// socket; a transfer server over the store's Source, so that other nodes
// can fetch its objects (over a verbs device for the SEND/RECV and READ
// protocols, over plain TCP for the baselines); a transfer fetcher as
// the store's Fetcher, asking the peers it was given; and an HTTP
// endpoint serving the store's and the transfer layer's counters as JSON
// at /stats.
//
// Serve writes one line saying where the node listens, which scripts and
// the benchmark harness parse with ParseAnnouncement:
//
//	objstore: serving socket=@rdmakit-objstore-1f2e verbs=127.0.0.1:40613 tcp=127.0.0.1:40614 stats=127.0.0.1:40615
//
// A part the node does not run is written as "-".
package node
