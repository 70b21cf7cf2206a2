package smart_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestForeignRequestsOnWorkerQP posts requests of another user, with a
// tag of its own, on a worker's QP: the worker's poller routes their
// completions to that user's handler, a handler's error does not stop
// the worker, and the tasks' lists keep completing.
func TestForeignRequestsOnWorkerQP(t *testing.T) {
	fabric := fmt.Sprintf("smart%d", fabricSeq.Add(1))
	node := newMemoryNode(t, fabric, "mem")
	dev, pd, buf := newClient(t, fabric)
	var mu sync.Mutex
	var qps []verbs.QP
	connect := func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
		qp, err := node.connect(dev)(ctx, cq)
		mu.Lock()
		qps = append(qps, qp)
		mu.Unlock()
		return qp, err
	}
	router := new(verbs.Router)
	rt, err := smart.New(context.Background(), smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{connect},
		Workers: 1, Router: router})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Router() != router {
		t.Fatal("Router() is not the configured router")
	}
	got := make(chan verbs.WC, 16)
	tag, err := router.Register(func(wc *verbs.WC) error {
		got <- *wc
		return errors.New("a handler's error")
	})
	if err != nil {
		t.Fatal(err)
	}
	copy(node.mr.Bytes(), "12345678")
	local := verbs.SGE{Addr: buf.Addr() + 64, Length: 8, LKey: buf.LKey()}
	task, err := rt.Workers()[0].Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer task.Leave()
	for i := uint64(0); i < 10; i++ {
		err := qps[0].PostSend([]verbs.SendWR{{ID: tag.ID(i), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
			SGL: []verbs.SGE{local}, RemoteAddr: node.mr.Addr(), RKey: node.mr.RKey()}})
		if err != nil {
			t.Fatal(err)
		}
		res := verbs.SGE{Addr: buf.Addr(), Length: 8, LKey: buf.LKey()}
		if err := task.FAA(0, res, node.mr.Addr()+8, node.mr.RKey(), 1); err != nil {
			t.Fatalf("task FAA %d: %v", i, err)
		}
		select {
		case wc := <-got:
			if wc.ID != tag.ID(i) || wc.Status != verbs.StatusSuccess || wc.Opcode != verbs.WCRead {
				t.Errorf("foreign completion %d: %#x %v %v", i, wc.ID, wc.Status, wc.Opcode)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("foreign READ %d never completed", i)
		}
	}
	if string(buf.Bytes()[64:72]) != "12345678" {
		t.Errorf("foreign READ read %q", buf.Bytes()[64:72])
	}
	if router.Dropped() != 0 {
		t.Errorf("%d completions dropped", router.Dropped())
	}
}
