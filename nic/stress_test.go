package nic_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// TestDeregisterUnderLoad deregisters a region while several QPs hammer it
// with READs, WRITEs and atomics: nothing crashes, every request completes,
// each with success or REM_ACCESS_ERR (and the flushes that follow one).
func TestDeregisterUnderLoad(t *testing.T) {
	const workers = 4
	p := newPair(t)
	target := p.peer
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := make(chan struct{}, workers)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			q := p.extraQP(t)
			wc := make([]verbs.WC, 8)
			ops := []verbs.Opcode{verbs.OpRead, verbs.OpWrite, verbs.OpAtomicFetchAndAdd}
			for i := 0; ; i++ {
				if i == 10 {
					started <- struct{}{}
				}
				wr := []verbs.SendWR{{
					ID: uint64(i), Opcode: ops[(i+w)%len(ops)], Flags: verbs.FlagSignaled,
					SGL:        []verbs.SGE{{Addr: p.local.Addr() + uint64(w*64), Length: 8, LKey: p.local.LKey()}},
					RemoteAddr: target.Addr() + uint64(w*64), RKey: target.RKey(),
					Atomic: verbs.AtomicArgs{Swap: [4]uint64{1}},
				}}
				if err := q.qp.PostSend(wr); err != nil {
					errs <- err
					return
				}
				n, err := verbs.PollWait(ctx, q.cq, wc, verbs.PollAdaptive)
				if err != nil || n != 1 {
					errs <- err
					return
				}
				switch wc[0].Status {
				case verbs.StatusSuccess:
				case verbs.StatusRemAccessErr:
					if q.qp.State() != verbs.StateError {
						t.Errorf("QP in %v after REM_ACCESS_ERR", q.qp.State())
					}
					return
				default:
					t.Errorf("unexpected status %v", wc[0].Status)
					return
				}
			}
		}(w)
	}
	for w := 0; w < workers; w++ {
		<-started
	}
	if err := target.Deregister(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

type extra struct {
	qp verbs.QP
	cq verbs.CQ
}

// extraQP connects one more QP from the pair's client node to a new QP on
// the server node, each with its own CQ.
func (p *pair) extraQP(t testing.TB) extra {
	t.Helper()
	cq, err := p.dev.CreateCQ(64)
	if err != nil {
		t.Error(err)
		return extra{}
	}
	pcq, _ := p.peerDev.CreateCQ(64)
	qa, err := p.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Error(err)
		return extra{}
	}
	qb, _ := p.peerPD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: pcq, RecvCQ: pcq})
	if err := verbs.ConnectRC(qa, verbs.AccessAll, p.peerDev.Address(), qb.QPN()); err != nil {
		t.Error(err)
	}
	if err := verbs.ConnectRC(qb, verbs.AccessAll, p.dev.Address(), qa.QPN()); err != nil {
		t.Error(err)
	}
	return extra{qa, cq}
}
