// Package memnode is rdmakit's memory node as a library: a server that
// registers memory on a verbs device and serves it to clients that
// connect through the connection manager (package cm), each on its own
// RC queue pair. The `rdmakit node` command, `rdmakit kv serve`, the
// benchmarks and the tests all run this one server.
//
// A Server owns the client lifecycle, the part every memory server needs
// and none should write twice:
//
//   - handshakes run concurrently, each bounded by Config.HandshakeTimeout,
//     so a dialer that never completes its exchange delays nobody else;
//   - a client must present Config.Token (Hello, sent as the cm private
//     data; compared in constant time) or it is refused;
//   - a client that departs — its liveness probe (a 0-byte RDMA READ every
//     Config.Probe) fails, its QP goes to ERROR, or its session's Serve
//     returns an error — has everything created for it freed: QP, CQ,
//     SRQ, receive buffers and its goroutine;
//   - Close (or the end of Run's context) stops the server within
//     Config.ShutdownTimeout whatever the clients do: handshakes under way
//     are cut, sessions are cancelled and not waited for beyond the bound.
//
// What a client is served is a Service. The default one is the memory
// node proper: Config.Memory split into Config.Regions regions whose
// descriptors (cm.EncodeDescs) every client receives as the private data
// of its connection reply, plus receives (and, with Config.Echo, echoes)
// for SEND and WRITE_WITH_IMM. Other servers — a key-value store node
// (kv/stores.Service) — plug their own Service into Config.NewService and
// keep the same lifecycle.
//
// Info describes a running server to its clients (device, cm address,
// regions); the `node` command prints it as one JSON line that ReadInfo
// parses back.
//
// Files: config.go (Config), hello.go (the client's private data),
// service.go (Service, Session), server.go (Start, Close, accept loop),
// client.go (one client: probe, departure, release), regions.go (the
// default service), info.go (Info), metrics.go (Prometheus).
package memnode
