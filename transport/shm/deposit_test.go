package shm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

// depositPair connects a sender endpoint to a receiver endpoint opened
// with the URI query q, and waits until the sender maps the receiver's
// region.
func depositPair(t *testing.T, q string) (snd, rcv *endpoint) {
	t.Helper()
	snd = mustEndpoint(t, 1<<16)
	var err error
	if rcv, err = newEndpoint(uniqueName("rcv")+q, 1<<16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.dev.Close() })
	if err := snd.connect(rcv.dev.Address(), rcv.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := rcv.connect(snd.dev.Address(), snd.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !shm.Mapped(snd.dev, rcv.dev.Address(), rcv.mr.RKey()); {
		if time.Now().After(deadline) {
			t.Fatal("receiver's region never mapped")
		}
		time.Sleep(time.Millisecond)
	}
	return snd, rcv
}

// recvWC waits for the next receive completion of e.
func (e *endpoint) recvWC(t *testing.T) verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	for {
		n, err := verbs.PollWait(ctx, e.cq, wc, verbs.PollAdaptive)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 && wc[0].Opcode == verbs.WCRecv {
			return wc[0]
		}
	}
}

// sendsServed is how many SENDs the device's nic served from its rings.
func sendsServed(t *testing.T, dev verbs.Device) uint64 {
	t.Helper()
	st, _, err := shm.Stats(dev)
	if err != nil {
		t.Fatal(err)
	}
	return st.Ops[verbs.OpSend] + st.Ops[verbs.OpSendWithImm]
}

// TestDepositSend: SENDs into posted receives whose buffers the sender
// maps are deposited by the sender (the receiver's nic serves none of
// them from its rings) and complete exactly as over the rings (deposit=0):
// same completions at both ends, same bytes.
func TestDepositSend(t *testing.T) {
	var got [2][]verbs.WC
	var sent [2][]verbs.WC
	for i, q := range []string{"", "?deposit=0"} {
		snd, rcv := depositPair(t, q)
		copy(snd.mr.Bytes(), "hello, deposited world! 0123456789")
		recvs := []verbs.RecvWR{
			{ID: 7, SGL: []verbs.SGE{{Addr: rcv.mr.Addr() + 100, Length: 5, LKey: rcv.mr.LKey()}, {Addr: rcv.mr.Addr() + 200, Length: 64, LKey: rcv.mr.LKey()}}},
			{ID: 8, SGL: rcv.local(300, 64)},
			{ID: 9, SGL: rcv.local(400, 64)},
		}
		if err := rcv.qp.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		wrs := []verbs.SendWR{
			{Opcode: verbs.OpSend, SGL: snd.local(0, 34)},
			{Opcode: verbs.OpSendWithImm, Imm: 0xabcd, Flags: verbs.FlagSolicited, SGL: snd.local(7, 9)},
			{Opcode: verbs.OpSend, Flags: verbs.FlagInline, SGL: snd.local(0, 0)},
		}
		for _, wr := range wrs {
			s := snd.do(t, wr)
			w := rcv.recvWC(t)
			if s.QPN != snd.qp.QPN() || w.QPN != rcv.qp.QPN() || w.SrcQPN != snd.qp.QPN() {
				t.Fatalf("%q: QP numbers in %+v / %+v", q, s, w)
			}
			s.QPN, w.QPN, w.SrcQPN = 0, 0, 0
			w.SrcID = 0 // the peer's number differs by connection
			sent[i], got[i] = append(sent[i], s), append(got[i], w)
		}
		if !bytes.Equal(rcv.mr.Bytes()[100:105], []byte("hello")) || !bytes.Equal(rcv.mr.Bytes()[200:229], []byte(", deposited world! 0123456789")) ||
			!bytes.Equal(rcv.mr.Bytes()[300:309], []byte("deposited")) {
			t.Fatalf("%q: receive buffers %q %q %q", q, rcv.mr.Bytes()[100:105], rcv.mr.Bytes()[200:229], rcv.mr.Bytes()[300:309])
		}
		served := sendsServed(t, rcv.dev)
		if q == "" && served != 0 {
			t.Errorf("deposit on: the receiver served %d SENDs from its rings, want 0", served)
		}
		if q != "" && served != 3 {
			t.Errorf("deposit off: the receiver served %d SENDs from its rings, want 3", served)
		}
	}
	for i := range got[0] {
		if fmt.Sprint(got[0][i]) != fmt.Sprint(got[1][i]) || fmt.Sprint(sent[0][i]) != fmt.Sprint(sent[1][i]) {
			t.Errorf("SEND %d: deposited %+v / %+v, over the rings %+v / %+v", i, sent[0][i], got[0][i], sent[1][i], got[1][i])
		}
	}
}

// TestDepositAllocatesNothing: a deposited SEND — post, deposit, the
// sender's completion, the receiver's poll taking the deposited
// completion up, the re-posted receive — allocates nothing.
func TestDepositAllocatesNothing(t *testing.T) {
	p := newPair(t, 4096)
	recv := []verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: p.peer.Addr() + 2048, Length: 64, LKey: p.peer.LKey()}}}}
	send := []verbs.SendWR{{ID: 9, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}}}}
	wc := make([]verbs.WC, 4)
	one := func() {
		if err := p.peerQP.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		p.roundTrip(t, send, wc)
		for {
			n, err := p.peerCQ.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				if wc[0].Status != verbs.StatusSuccess || wc[0].Opcode != verbs.WCRecv {
					t.Fatalf("receive %+v", wc[0])
				}
				return
			}
		}
	}
	one()
	if a := testing.AllocsPerRun(1000, one); a != 0 {
		t.Errorf("a deposited SEND allocates %v times", a)
	}
	if n := sendsServed(t, p.peerDev); n != 0 {
		t.Errorf("the receiver served %d SENDs from its rings, want 0 (all deposited)", n)
	}
}

// TestDepositWakesWaiter: a receiver blocked in CQ.Wait (its NIC
// goroutine asleep on the bell: spin=0) is woken by a deposit — the
// depositor's pending word and bell — and finds the receive completion.
func TestDepositWakesWaiter(t *testing.T) {
	snd, rcv := depositPair(t, "?spin=0")
	if err := rcv.qp.PostRecv([]verbs.RecvWR{{ID: 3, SGL: rcv.local(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := rcv.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	wc := make([]verbs.WC, 1)
	if n, _ := rcv.cq.Poll(wc); n != 0 {
		t.Fatalf("completion before the SEND: %+v", wc[0])
	}
	woke := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { woke <- rcv.cq.Wait(ctx) }()
	time.Sleep(20 * time.Millisecond) // the NIC goroutine goes to sleep on the bell
	if w := snd.do(t, verbs.SendWR{Opcode: verbs.OpSend, SGL: snd.local(0, 8)}); w.Status != verbs.StatusSuccess {
		t.Fatalf("SEND %+v", w)
	}
	if err := <-woke; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if n, err := rcv.cq.Poll(wc); n != 1 || err != nil || wc[0].ID != 3 || wc[0].Status != verbs.StatusSuccess {
		t.Fatalf("after the wake: %d %+v %v", n, wc[0], err)
	}
	if n := sendsServed(t, rcv.dev); n != 0 {
		t.Errorf("the receiver served %d SENDs from its rings, want 0", n)
	}
}

// TestRepostAfterDepositedCompletion: a receive whose deposited completion
// was polled can be posted again at once, even while its depositor has
// not yet recorded the receive consumed (it publishes the completion
// first, both under the area's lock): PostRecv on a full queue waits for
// the depositor instead of failing with ErrQueueFull.
func TestRepostAfterDepositedCompletion(t *testing.T) {
	snd, rcv := depositPair(t, "")
	// Fill the receive queue.
	posted := 0
	for ; ; posted++ {
		err := rcv.qp.PostRecv([]verbs.RecvWR{{ID: uint64(posted), SGL: rcv.local(uint64(posted%64)*64, 64)}})
		if errors.Is(err, verbs.ErrQueueFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if posted < 2 {
		t.Fatalf("only %d receives fit", posted)
	}
	// The first SEND is deposited whole; the second stops with its
	// completion published and its receive not yet recorded consumed.
	held, release := shm.HoldDeposit(2, 2)
	send := func() {
		if err := snd.qp.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpSend, SGL: snd.local(0, 8)}}); err != nil {
			t.Error(err)
		}
	}
	send()
	go send()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("the second SEND was not deposited")
	}
	time.AfterFunc(50*time.Millisecond, release)
	for i := 0; i < 2; i++ {
		wc := rcv.recvWC(t)
		if wc.Status != verbs.StatusSuccess {
			t.Fatalf("receive %d: %v", i, wc.Status)
		}
		if err := rcv.qp.PostRecv([]verbs.RecvWR{{ID: wc.ID, SGL: rcv.local(wc.ID%64*64, 64)}}); err != nil {
			t.Fatalf("posting receive %d again after its completion: %v", wc.ID, err)
		}
	}
}
