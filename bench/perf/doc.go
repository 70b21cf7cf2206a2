// Package perf measures a pair of verbs devices the way the perftest
// tools (ib_read_lat, ib_write_bw, …) measure RDMA NICs: latency by
// posting one operation at a time and polling for its completion, and
// bandwidth by keeping a window of operations outstanding with selective
// signaling.
//
// Both ends are opened in this process by URI (any registered transport:
// loop://FABRIC/NODE, …). READ, WRITE, CAS and FAA are one-sided: the
// server only registers memory. For SEND a goroutine plays the server: it
// re-posts receives and, in the latency test, sends every message back, so
// SEND latency is half a round trip, as in ib_send_lat. The SEND bandwidth
// test never posts more SENDs than the server has posted receives (a
// credit shared in memory), so no SEND waits for a receive (RNR).
//
// The measured loops allocate nothing; every buffer is allocated when the
// Pair is opened.
package perf
