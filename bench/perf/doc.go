// Package perf measures a pair of verbs devices the way the perftest
// tools (ib_read_lat, ib_write_bw, …) measure RDMA NICs: latency by
// posting one operation at a time and polling for its completion, and
// bandwidth by keeping a window of operations outstanding with selective
// signaling.
//
// The measured loops use only the client's side of a Pair: its QP, CQ and
// buffer, and the descriptor (cm.MRDesc) of the server's region. The
// server is either opened in this process (Open, any registered
// transport: loop://FABRIC/NODE, tcp://…) or runs elsewhere and is reached
// through the connection manager (Dial; rdmakit node is such a server).
//
// READ, WRITE, CAS and FAA are one-sided: the server only registers
// memory. For SEND the in-process server is a goroutine that re-posts
// receives and, in the latency test, sends every message back, so SEND
// latency is half a round trip, as in ib_send_lat; its bandwidth test never
// posts more SENDs than the server has posted receives (a credit shared in
// memory), so no SEND waits for a receive (RNR). A remote server must keep
// receives posted itself; the latency test needs it to echo (probed with
// the first SEND, see EchoTimeout and ErrNoEcho). Against an echoing
// server the bandwidth test keeps at most Window messages un-echoed;
// otherwise the client's QP retries SENDs that find no receive (RNR)
// forever, so a Window larger than the server's posted receives costs
// time, not correctness.
//
// The measured loops allocate nothing; every buffer is allocated when the
// Pair is opened.
package perf
