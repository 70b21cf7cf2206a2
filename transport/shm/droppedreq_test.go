package shm_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestRequestToGoneQPFailsOnBusyLink: a request whose responder QP is
// gone fails with RETRY_EXC_ERR at its QP's retry budget even while the
// link carries other QPs' answers all along (kv-peers found GETs that
// waited for good: the node had dropped the client's QPs, and the
// client's other traffic kept the link looking alive). RC's retry timer
// is per QP; the responder's drop notice makes it so here.
func TestRequestToGoneQPFailsOnBusyLink(t *testing.T) {
	a, b := mustEndpoint(t, 4096), mustEndpoint(t, 4096)
	bq := connectPair(t, a, b) // a.qp ↔ bq: the one whose responder goes

	// A second pair on the same devices keeps the link busy with 0-byte
	// READs, which always travel the ring and are always answered.
	q2, err := a.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: a.cq, RecvCQ: a.cq})
	if err != nil {
		t.Fatal(err)
	}
	cq2, err := a.dev.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	q2b, err := a.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq2, RecvCQ: cq2})
	if err != nil {
		t.Fatal(err)
	}
	_ = q2
	bq2, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: b.cq, RecvCQ: b.cq})
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(bq2, verbs.AccessAll, a.dev.Address(), q2b.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(q2b, verbs.AccessAll, b.dev.Address(), bq2.QPN()); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var busy sync.WaitGroup
	var answered atomic.Int64
	busy.Add(1)
	go func() {
		defer busy.Done()
		for !stop.Load() {
			wc, err := postWait(q2b, cq2, verbs.SendWR{Opcode: verbs.OpRead})
			if err != nil || wc.Status != verbs.StatusSuccess {
				t.Errorf("busy pair: %v %v", wc.Status, err)
				return
			}
			answered.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { stop.Store(true); busy.Wait() }()

	// A budget of 400 ms: the request must fail well before lostAfter
	// budgets (1.6 s), the bound on a request the responder did not
	// say it dropped.
	if err := a.qp.Modify(verbs.QPAttr{State: verbs.StateRTS, Timeout: 200 * time.Millisecond, RetryCount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := bq.Destroy(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wc, err := postWait(a.qp, a.cq, verbs.SendWR{Opcode: verbs.OpRead})
	took := time.Since(start)
	if err != nil || wc.Status != verbs.StatusRetryExcErr {
		t.Fatalf("READ to a destroyed QP: %v %v, want RETRY_EXC_ERR", wc.Status, err)
	}
	if took > 1200*time.Millisecond {
		t.Fatalf("READ to a destroyed QP failed after %v, want about its 400 ms budget", took)
	}
	if answered.Load() == 0 {
		t.Fatal("the busy pair moved nothing: the link was not busy")
	}
	t.Logf("failed after %v while the busy pair had %d answers", took, answered.Load())
}

// TestAnswerBeforeTracking: the device may answer a request the moment it
// is published, and another goroutine may poll the link then; the link
// must already track the request (it once took the link down: "an answer
// to no request", a node losing every client of a device).
func TestAnswerBeforeTracking(t *testing.T) {
	a, b := mustEndpoint(t, 4096), mustEndpoint(t, 4096)
	connectPair(t, a, b)
	deaths, undo := shm.PollEachAnswerAtPublish()
	defer undo()
	for i := range 20 {
		// 0-byte READs always travel the ring and are always answered.
		wc, err := postWait(a.qp, a.cq, verbs.SendWR{Opcode: verbs.OpRead})
		if err != nil || wc.Status != verbs.StatusSuccess {
			t.Fatalf("READ %d: %v %v", i, wc.Status, err)
		}
	}
	if n := deaths(); n > 0 {
		t.Fatalf("the link died in %d polls that found an answer at publish time", n)
	}
}

// TestAnswerAfterEmptyLook: a poller that found nothing in flight and is
// preempted before it looks at the response ring may find there the
// answer to a request appended meanwhile; that is not an answer to no
// request (it took PRISM-TX's client link to a node down under 32
// clients: every later transaction failed).
func TestAnswerAfterEmptyLook(t *testing.T) {
	a, b := mustEndpoint(t, 4096), mustEndpoint(t, 4096)
	connectPair(t, a, b)
	posted := make(chan error, 1)
	undo := shm.AnswerWhileLookingEmpty(func() {
		posted <- a.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled}})
	})
	defer undo()
	// 0-byte READs always travel the ring and are always answered.
	wc, err := postWait(a.qp, a.cq, verbs.SendWR{ID: 1, Opcode: verbs.OpRead})
	if err != nil || wc.Status != verbs.StatusSuccess || wc.ID != 1 {
		t.Fatalf("first READ: %+v %v", wc, err)
	}
	if err := <-posted; err != nil {
		t.Fatalf("second READ, posted while the poller looked away: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make([]verbs.WC, 1)
	for {
		n, err := verbs.PollWait(ctx, a.cq, got, verbs.PollAdaptive)
		if err != nil {
			t.Fatalf("second READ: %v", err)
		}
		if n == 1 {
			break
		}
	}
	if got[0].Status != verbs.StatusSuccess || got[0].ID != 2 {
		t.Fatalf("second READ completed %+v, want ID 2 SUCCESS (the link died?)", got[0])
	}
	if wc, err := postWait(a.qp, a.cq, verbs.SendWR{ID: 3, Opcode: verbs.OpRead}); err != nil || wc.Status != verbs.StatusSuccess {
		t.Fatalf("a READ after: %+v %v", wc, err)
	}
}
