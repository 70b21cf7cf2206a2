package rpc

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/loop"
)

// countingQP counts the receives posted on a QP.
type countingQP struct {
	verbs.QP
	recvs atomic.Int64
}

func (q *countingQP) PostRecv(wrs []verbs.RecvWR) error {
	q.recvs.Add(int64(len(wrs)))
	return q.QP.PostRecv(wrs)
}

var serverConnFabrics atomic.Int64

// TestReceiveRepostedBeforeAnswerCompletes: a request's receive is
// posted again as soon as the request is handled, not when the SEND of
// its answer completes — which takes the client's acknowledgement, late
// on a loaded machine, and a client may send again as soon as it has the
// answer. Requests beyond the response buffers wait for one, and are
// answered when an answer completes.
func TestReceiveRepostedBeforeAnswerCompletes(t *testing.T) {
	dev, err := verbs.Open(fmt.Sprintf("loop://serverconn-%d/node", serverConnFabrics.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(64)
	raw, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
		t.Fatal(err)
	}
	qp := &countingQP{QP: raw}
	const n = 4
	s := NewServer(ServerConfig{Recvs: n, MaxMessage: 64})
	s.Handle(1, func(req, resp []byte) (int, error) { return copy(resp, req), nil })
	c, err := s.newConn(pd, qp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	posted := qp.recvs.Load() // the initial n
	// A request of 8 bytes in receive slot i.
	arrive := func(i int) {
		t.Helper()
		putHeader(c.mr.Bytes()[i*c.size:], 1, 0, uint32(i))
		if err := c.request(&verbs.WC{ID: c.recvTag.ID(uint64(i)), Opcode: verbs.WCRecv, ByteLen: Header}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		arrive(i)
	}
	if got := qp.recvs.Load() - posted; got != n {
		t.Fatalf("%d receives posted again after %d requests with no answer completed, want %d", got, n, n)
	}
	if len(c.sends) != n {
		t.Fatalf("%d answers queued, want %d", len(c.sends), n)
	}
	// Every response buffer is held: the next request waits.
	arrive(0)
	if len(c.sends) != n || len(c.pending) != 1 {
		t.Fatalf("%d answers, %d pending; want %d and 1", len(c.sends), len(c.pending), n)
	}
	first := c.sends[0].ID
	c.sends = c.sends[:0]
	if err := c.answered(&verbs.WC{ID: first, Opcode: verbs.WCSend}); err != nil {
		t.Fatal(err)
	}
	if len(c.sends) != 1 || len(c.pending) != 0 || c.sends[0].ID != first {
		t.Fatalf("after one answer completed: %d answers (%v), %d pending; want the waiting request answered in the freed buffer", len(c.sends), c.sends, len(c.pending))
	}
	if got := qp.recvs.Load() - posted; got != n+1 {
		t.Fatalf("%d receives posted again, want %d", got, n+1)
	}
}
