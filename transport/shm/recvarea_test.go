package shm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestAreaLockKeptByLivePeer: a live process that takes a receive queue's
// deposit lock and keeps it (a hostile or stopped peer) cannot stall the
// device for good: a SEND's deposit gives up and goes over the ring, the
// device waits lockPatience for the lock, then gives the area up and
// delivers the SEND without it (its ring service stalls meanwhile, once
// per area: docs/shm.md).
func TestAreaLockKeptByLivePeer(t *testing.T) {
	open := func(role string) (verbs.Device, verbs.PD, verbs.CQ, verbs.QP, verbs.MR) {
		dev, err := verbs.Open(fmt.Sprintf("shm://kept-%s-%d", role, os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(64)
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.AllocMR(4096, verbs.AccessAll)
		if err != nil {
			t.Fatal(err)
		}
		return dev, pd, cq, qp, mr
	}
	a, _, acq, aqp, amr := open("a")
	b, _, bcq, bqp, bmr := open("b")
	if err := verbs.ConnectRC(aqp, verbs.AccessAll, b.Address(), bqp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(bqp, verbs.AccessAll, a.Address(), aqp.QPN()); err != nil {
		t.Fatal(err)
	}
	// The device's ring service stalls for lockPatience: longer than the
	// default retry budget.
	if err := aqp.Modify(verbs.QPAttr{State: verbs.StateRTS, Timeout: 2 * time.Second, RetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	for !Mapped(a, b.Address(), bmr.RKey()) {
		time.Sleep(time.Millisecond)
	}
	ra := bqp.(*nic.QP).RecvAreaOf().(*recvArea)
	other, err := shmem.ProcessOf(os.Getppid()) // alive for the whole test
	if err != nil {
		t.Skip("no live process to hold the lock:", err)
	}
	if !ra.lk.TryLockAs(uint64(other)) {
		t.Fatal("area lock not free")
	}
	if err := bqp.PostRecv([]verbs.RecvWR{{ID: 5, SGL: []verbs.SGE{{Addr: bmr.Addr(), Length: 64, LKey: bmr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	copy(amr.Bytes(), "kept")
	if err := aqp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: amr.Addr(), Length: 4, LKey: amr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	for _, cq := range []verbs.CQ{acq, bcq} {
		if n, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); err != nil || n != 1 || wc[0].Status != verbs.StatusSuccess {
			t.Fatalf("completion %+v, %v", wc[0], err)
		}
	}
	if wc[0].ID != 5 || string(bmr.Bytes()[:4]) != "kept" {
		t.Fatalf("receive %+v, bytes %q", wc[0], bmr.Bytes()[:4])
	}
	if !ra.gone.Load() {
		t.Fatal("the area was not given up")
	}
}
