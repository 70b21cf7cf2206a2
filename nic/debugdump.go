package nic

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// live holds the nodes of this process that are open, for DumpQPs.
var live sync.Map // *Node → struct{}

// DumpQPs writes, for every open node of this process, the state of each
// RC QP that has requests outstanding or is not in RTS, with its send
// CQ's: what a stuck operation waits for, as a NIC driver's debugfs
// shows it. It reads the fields without the QPs' locks (a stuck QP's
// lock may be held for good): the figures are a snapshot, not a
// consistent one. For diagnosis only.
func DumpQPs(w io.Writer) {
	live.Range(func(k, _ any) bool {
		n := k.(*Node)
		fmt.Fprintf(w, "node %s (id %d): %d QPs\n", n.addr, n.id, len(*n.qps.Load()))
		for _, q := range *n.qps.Load() {
			if q.typ != verbs.RC {
				continue
			}
			dumpQP(w, q)
		}
		return true
	})
}

func dumpQP(w io.Writer, q *QP) {
	st := q.State()
	head, tail := atomic.LoadUint64(&q.send.sq.head), atomic.LoadUint64(&q.send.sq.tail)
	if st == verbs.StateRTS && head == tail {
		return
	}
	r := q.retx
	fmt.Fprintf(w, "  qp %d %v: sq [%d, %d) sent to %d, posted %d polled %d; hold %v fenced %v full %v running %v; dest qpn %d link %v direct %v\n",
		q.qpn, st, head, tail, max(r.next, head), q.send.posted, atomic.LoadUint64(&q.send.polled),
		r.hold, r.fenced, r.full, q.send.running, q.conn.destQPN, q.conn.destLink != nil, q.conn.direct != nil)
	if l := q.conn.destLink; l != nil {
		fmt.Fprintf(w, "    link %s progressed within the budget %v: %v\n", l.Address(), q.conn.retryBudget, l.Progressed(q.conn.retryBudget))
		if d, ok := l.(interface{ DebugState() string }); ok {
			fmt.Fprintf(w, "    link state: %s\n", d.DebugState())
		}
		fmt.Fprintf(w, "    oldest on the wire waited since tick %d; now tick %d\n", r.since, q.node.ticks.now())
	}
	for i := head; i < tail && i < head+4; i++ {
		e := q.send.sq.at(i)
		fmt.Fprintf(w, "    wr %d: %v flags %v len %d pre %v\n", e.seq, e.wr.Opcode, e.wr.Flags, e.wr.RemoteLen, e.pre)
	}
	if c := q.send.cq; c != nil {
		fmt.Fprintf(w, "    cq: solo %v single %v fenceless %v tail %d stail %d head %d armed %d overrun %v events %d closed %v\n",
			c.solo.Load() == q, c.single, c.fenceless, c.tail, atomic.LoadUint64(&c.stail), atomic.LoadUint64(&c.head),
			c.armed.Load(), c.overrun.Load(), len(c.ev), c.closed.Load())
	}
}
