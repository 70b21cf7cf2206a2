// Package shm is rdmakit's transport between processes on one host: every
// memory region is a memfd that the peers map, so READ, WRITE and the
// atomics run in the initiator's process, by load and store on the
// target's memory, without the target's CPU (the model of PCIe NTB
// windows and CXL shared memory). Two-sided operations (SEND, the
// *_WITH_IMM opcodes, UD datagrams) and one-sided operations the initiator
// cannot run itself travel as requests through a pair of shared-memory
// rings per connection and are executed by the target's nic, on whichever
// of its goroutines polls first: an application goroutine in CQ.Poll, or
// the device's NIC goroutine, which sleeps on a futex when nobody polls.
// A SEND into a receive queue that the target publishes in its deposit
// segment is deposited by the initiator itself: the payload into the
// receive's buffers, the receive's completion into the queue's area,
// under a robust lock with a journal (depseg.go); the target's polling
// only moves that completion into its CQ.
//
// Devices are shm://NAME. Set-up goes over an abstract Unix socket
// (@rdmakit-shm/NAME) that carries the memfds (SCM_RIGHTS); its end tells
// each side at once that the other process is gone (a periodic check of
// the peer's pid and start time catches a death whose sockets another
// process holds), and the connection's rings, mappings and memfds are
// freed (watch.go). The atomics lock table
// lives in the target's shared node segment: its stripes are robust locks,
// recovered (with a journal that undoes a half-applied 16- or 32-byte
// atomic) when a holder dies. Deregistering a region marks its table slot
// dead before Deregister returns — later operations by peers complete with
// REMOTE_ACCESS_ERR — and peers unmap it once no operation of theirs is
// using it. docs/shm.md describes the design and its figures.
package shm
