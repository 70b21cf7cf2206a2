package tcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestBatching: a post list of 16 READs leaves the initiator's device in
// writes that carry all 16 requests (several to a write: one doorbell),
// and the target's device, which dialed nothing, counts none. Another
// transport's device is refused.
func TestBatching(t *testing.T) {
	a, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(64)
	cqb, _ := b.CreateCQ(64)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	if err := verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	la, _ := pa.AllocMR(4096, verbs.AccessAll)
	rb, _ := pb.AllocMR(4096, verbs.AccessAll)
	w0, r0, err := tcp.Batching(a)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: la.Addr() + uint64(i*8), Length: 8, LKey: la.LKey()}},
			RemoteAddr: rb.Addr() + uint64(i*8), RKey: rb.RKey()}
	}
	if err := qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, n)
	for got := 0; got < n; {
		k, err := verbs.PollWait(ctx, cqa, wc[got:], verbs.PollAdaptive)
		if err != nil {
			t.Fatal(err)
		}
		got += k
	}
	w, r, _ := tcp.Batching(a)
	if w-w0 < 1 || w-w0 >= n || r-r0 != n {
		t.Errorf("%d requests in %d writes, want %d in 1 to %d", r-r0, w-w0, n, n-1)
	}
	if w, r, _ := tcp.Batching(b); w != 0 || r != 0 {
		t.Errorf("the target counts %d requests in %d writes, want none", r, w)
	}
	if _, _, err := tcp.Batching(notTCP{}); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("Batching(another device): %v, want ErrInvalidArg", err)
	}
}

// notTCP is a device of another transport.
type notTCP struct{ verbs.Device }
