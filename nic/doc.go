// Package nic is rdmakit's software NIC: one implementation of the verbs
// semantics shared by every software transport.
//
// A Node is one device. It owns the key tables (lkey → MR, rkey → MR),
// the QP table and the atomics lock table, and it executes work requests:
// key lookup, PD and access checks, bounds checks, the memory operation
// itself and completion generation. A transport supplies a Network that
// names the other nodes and says how each path currently behaves (up,
// delayed, blocked, dead); the loop transport puts many nodes in one
// process, the shm and tcp transports put the responder elsewhere.
//
// # Roles
//
// The engine is split by role, as a hardware NIC's is (and Linux's soft
// RoCE: requester, responder, completer). A request has one requester,
// chosen by where the responder is, and meets one responder:
//
//   - the local requester runs it on the poster's goroutine against a
//     responder QP in this process;
//   - the link requester encodes it onto a Link to another process and
//     completes it when the response arrives (go-back-N on RNR, timeouts);
//     there a Session admits it and runs the responder;
//   - the direct requester (shm) runs READ, WRITE and atomics itself on
//     the responder's memory as this process maps it, and deposits a SEND
//     into the responder's receive queue when that is published in memory
//     this process maps (deposit.go).
//
// The responder (responder.go) has the one opcode switch that executes a
// request against a responder's memory; the three paths differ only in
// where bytes come from and go to (the requester's scatter list, a
// Response frame, mapped memory). Its rules for reaching memory — rkey,
// PD, access, bounds — are the resolver's (resolve.go; the shm fast path
// calls Resolve with its own table entry), and its rule for copying —
// aligned 8 bytes move in one piece — is sgl.go's. The link requester's
// land, which stores a response into the requester's scatter list, is the
// requester's half of a READ or atomic, not a second responder.
//
// Work requests run on the poster's goroutine when nothing forces them to
// wait (the fast path: no allocation, no hand-off). A request that must
// wait — a SEND that found no receive (RNR), a delayed or blocked path —
// and every request behind it on the same QP move to a per-QP queue
// drained in order by a background goroutine, so RC ordering holds.
//
// # Files
//
// Objects and tables:
//
//	node.go              Node: the device, its tables, Network, paths and Close
//	pd.go                protection domains
//	mr.go                memory regions (mmap'd, memfd-backed when shared), deregistration
//	regmr.go             RegMR: the application's own memory registered in place (verbs.MemRegistrar)
//	keys.go              lkey and rkey tables
//	qp.go                QP: creation, Modify, state; fields grouped by role
//	qpn.go               QP numbers, drawn at random
//	cq.go                completion queues: the ring, Poll, arming
//	solo.go              a CQ with one producer QP completes without its lock
//	single.go            SingleThreaded QPs (the biased QP lock) and CQs (CreateCQEx)
//	membarrier_linux.go  the arm race of a single-threaded CQ, fenced on the rare side
//	storerel_*.go, .s    release stores: a plain MOV on amd64
//	rq.go                receive queues and SRQs
//	deposit.go           receive queues published for direct deposit (RecvArea), Depositor
//	sq.go                the send queue (deferred and on-the-wire requests)
//	freelist.go          PRISM free lists and ALLOCATE
//	scratch.go           the per-QP scratch area a responder offers its peer
//	isolation.go         tenant isolation: a QP serves only its connected peer
//
// Requesters, by where the responder is:
//
//	post.go              PostSend: validation, the fast path, the deferred queue, completions
//	requester_local.go   toward a responder in this process
//	requester_link.go    toward another process over a Link: transmit, responses, land, Expire
//	retransmit.go        the link requester's go-back-N state (retx), on its own
//	requester_direct.go  toward mapped memory (DirectLink): READ, WRITE, atomics with no responder CPU
//	requester_fast.go    its fast path: a lone plain READ, WRITE, CAS or FETCH_ADD, with per-QP caches (Grant)
//	requester_deposit.go a SEND deposited into the responder's published receive queue (Depositor)
//	chain.go             PRISM chaining (CONDITIONAL) and the flags a QP accepts
//
// The responder:
//
//	responder.go         the one opcode switch: READ, WRITE, WRITE_IMM, SEND, ALLOCATE, atomics, PRISM
//	responder_atomic.go  the atomics unit: the striped lock table, CAS / FAA / masked operations
//	responder_link.go    Session: the responder's face toward a link (admission, epochs, RNR, Responses)
//	deliver.go           a message into the oldest posted receive, and its completion
//	resolve.go           the resolver: (rkey, addr, len) → bytes, with PD, access and bounds checks
//	sgl.go               scatter/gather lists: resolving local lists, copying, the 8-byte rule
//
// Contracts with transports and the rest:
//
//	link.go              the Link contract a remote transport implements; Request and Response
//	peers.go             PeerTable: numbering the peers of a node
//	grace.go             SilenceGrace: when a silent link counts as dead
//	ticks.go             the coarse clock requests on the wire are stamped with
//	cost.go              an optional cost model (service time, WQE cache)
//	stats.go             counters (Stats)
//	observer.go          Observer: regions and QPs as they change (shm publishes them)
//
// The NIC's own tests live here: unit tests in package nic (among them
// retransmit_test.go, the retransmission state in isolation), and in
// package nic_test, driven over the loop transport, the PostSend fuzz
// target (fuzz_test.go), the zero-allocation guard and benchmarks of the
// hot path (bench_test.go) and a deregistration stress test
// (stress_test.go). The behaviour every transport must show is
// verbs/verbstest's suite.
package nic
