// Package verbs is the API every layer of rdmakit programs against: the
// ibverbs programming model in idiomatic Go.
//
// A program opens a Device by URI (loop://fabric/node, shm://name,
// tcp://host:port), allocates a protection domain (PD), registers memory
// regions (MR) in it, creates completion queues (CQ) and queue pairs (QP),
// moves the QPs through RESET → INIT → RTR → RTS and posts work requests
// (SendWR, RecvWR). Completions (WC) are polled in batches from CQs or
// waited for with ReqNotify and Wait.
//
// The semantics follow ibverbs: RC executes a QP's work requests in order;
// a remote error moves the QP to ERROR and flushes what follows with
// StatusWRFlushErr; aligned 8-byte WRITEs and atomics are single-copy
// atomic; atomics are atomic with respect to other NIC atomics on the same
// node, not with respect to the host CPU; misaligned atomics are rejected;
// a SEND with no posted receive is retried and then completes with
// StatusRNRRetryExcErr; unsignaled work requests complete silently but
// errors always complete.
//
// Users that share a CQ (an rpc client and a store's one-sided requests,
// a smart worker and whoever posts on its QPs) share a Router: each
// registers a handler and puts the Tag it gets in the high bits of its
// wr_ids; the poller hands every completion it polls to Router.Dispatch.
//
// Providers (transports) register themselves with Register; a program
// imports the transport it wants for its side effect:
//
//	import _ "github.com/rdmakit/rdmakit/transport/loop"
package verbs
