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
// Work requests run on the poster's goroutine when nothing forces them to
// wait (the fast path: no allocation, no hand-off). A request that must
// wait — a SEND that found no receive (RNR), a delayed or blocked path —
// and every request behind it on the same QP move to a per-QP queue
// drained in order by a background goroutine, so RC ordering holds.
//
// The NIC's own tests live here: unit tests in package nic, and in package
// nic_test, driven over the loop transport, the PostSend fuzz target
// (fuzz_test.go), the zero-allocation guard and benchmarks of the hot path
// (bench_test.go) and a deregistration stress test (stress_test.go). The
// behaviour every transport must show is verbs/verbstest's suite.
package nic
