// Package sock is a socket stack over remote memory, after NT.Sockets
// (the thesis' chapter 5): net.Conn and net.Listener whose bytes move by
// one-sided RDMA WRITEs into rings in the peer's registered memory — the
// role PCIe NTB windows play in the thesis. Unmodified Go servers
// (net/http, gRPC) run on it.
//
//	ln, err := sock.Listen(ctx, "shm://web")        // processes on this host
//	ln, err := sock.Listen(ctx, "tcp://0.0.0.0:7480") // other hosts
//	go http.Serve(ln, handler)
//	c, err := sock.Dial(ctx, "shm://web")
//
// # Links, partitions, rings
//
// Two endpoints (a listener and a Dialer, each one verbs device) share one
// link however many connections they open: the control stream (a Unix
// socket for shm://, TCP for tcp://) sets it up (HELLO → WELCOME → READY)
// and then carries only connection set-up (SYN → SYNACK or REJECT). Each
// side registers a window (see window.go for the layout) holding
// Config.Partitions rings and a control ring; the other side WRITEs into
// it through one RC QP per partition and a control QP.
//
// A connection lives in one partition, assigned round-robin (or by the
// control plane). A record is an 8-byte header (length, kind, sync bit,
// the receiver's connection slot and generation) followed by the payload;
// the sender writes the payload first and the header last, with one
// aligned 8-byte WRITE, so a receiver that sees a non-zero header sees the
// whole record. The receiver zeroes headers as it consumes them. The
// sender keeps a shadow of the receiver's read index; when its ring is
// over half full by that shadow it sets the sync bit, and the receiver
// answers by WRITEing its read index into the sender's shadow word.
//
// Writes are sliced into records of at most Config.MTU bytes; a
// connection sends at most Config.BatchLimit records per turn on its
// partition, and turns go round in FIFO order — the thesis' remedies for
// head-of-line blocking.
//
// # Flow control
//
// Receiver-driven: each connection's receiver grants its peer a window
// (Config.ReadBuffer, Conn.SetReadBuffer) and, as Read consumes, writes
// the new limit into the sender's control ring. A sender never has more
// than the window outstanding, so the RX side can always move a record
// out of the ring: a connection whose application does not read stops its
// own sender and nobody else.
//
// # Who does the work: modes
//
// In Direct mode (the default) application goroutines do everything: a
// Write copies its records into the peer's ring, a Read polls its
// partition's ring and takes its records straight into its buffer. In
// SP2C a TX goroutine per partition forwards the connections' send queues
// round-robin and an RX goroutine polls the ring; SPSC does both on one
// goroutine. Pollers spin for Config.Spin, then park: they WRITE a
// "sleeping" word into the peer's window, and the peer follows its next
// write with a doorbell (a SEND on the control QP), on which the link's
// doorbell goroutine drains the rings and wakes whoever waits.
//
// # Failures
//
// A peer process that dies closes its control stream; the link fails at
// once and every connection on it gets ErrReset (wrapping
// syscall.ECONNRESET). A peer that breaks the protocol (a garbage header,
// an impossible read index, a garbage credit entry) fails its own link and
// no other; a record over its connection's credit resets that connection
// only. Everything a peer can make this side allocate is bounded:
// connections per link (MaxConns), each connection's receive queue (its
// window), control messages (4 KiB).
package sock
