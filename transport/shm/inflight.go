package shm

import (
	"sync/atomic"

	"github.com/rdmakit/rdmakit/internal/wire"
	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// Acknowledgements. A successful SEND, WRITE or WRITE_WITH_IMM has nothing
// to return, so the device does not answer it: it answers only READs,
// atomics, RNRs and errors, each before it releases the request from the
// ring. The dialer keeps, per connection, the requests it put on the ring
// in order with the ring position where each ends; once the device's
// released position passes a request, either its answer is already in the
// response ring (it is the next one there) or the request succeeded, and
// the dialer completes it with a synthesized acknowledgement. Requests the
// device discarded (after an RNR or an error of their QP) are
// acknowledged this way too, and dropped by the QP as stale, as a
// retransmitted request's late answer would be; a discarded READ or atomic
// is retired without telling the QP (link.poll).

// inflightCap bounds the requests a link tracks; Append reports the link
// full beyond it.
const inflightCap = 1 << 14

// inflight is a request on the ring awaiting completion.
type inflight struct {
	end      uint64 // ring position just past the request
	qpn      uint32
	epoch    uint32
	seq      uint32
	implicit bool // no answer unless it failed
}

// inflightQueue is a single-producer (Append, under pmu) single-consumer
// (poll, under cmu) queue of in-flight requests.
type inflightQueue struct {
	ent  [inflightCap]inflight
	head atomic.Uint64 // consumer
	tail atomic.Uint64 // producer
}

func (q *inflightQueue) full() bool { return q.tail.Load()-q.head.Load() >= inflightCap }

func (q *inflightQueue) push(e inflight) {
	t := q.tail.Load()
	q.ent[t%inflightCap] = e
	q.tail.Store(t + 1)
}

// front returns the oldest entry, or nil.
func (q *inflightQueue) front() *inflight {
	h := q.head.Load()
	if h == q.tail.Load() {
		return nil
	}
	return &q.ent[h%inflightCap]
}

func (q *inflightQueue) pop() { q.head.Add(1) }

// implicitAck reports whether the device leaves r unanswered when it
// succeeds: SEND, SEND_WITH_IMM, WRITE and WRITE_WITH_IMM (not ALLOCATE,
// which returns an address).
func implicitAck(r *nic.Request) bool {
	return !r.Datagram && wire.HasPayload(r.Opcode) && r.Opcode != verbs.OpAllocate
}
