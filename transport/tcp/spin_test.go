package tcp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// parkSocket is an emptySocket whose waitReadable records the park and
// makes the next read find data.
type parkSocket struct {
	emptySocket
	parkedAt atomic.Int64 // reads before the park; 0: never parked
}

func (p *parkSocket) waitReadable() error {
	p.parkedAt.Store(p.reads.Load())
	p.done.Store(true)
	return nil
}

// TestSpinReaderParksWhileAwaiting: a session's reader does not spin
// while its node waits for answers on its own links — neither from the
// start nor once the node starts waiting during the spin — and parks in
// a blocking wait instead; it spins as before otherwise.
func TestSpinReaderParksWhileAwaiting(t *testing.T) {
	var buf [8]byte
	// Waiting from the start: one read, then the park.
	sock := &parkSocket{}
	r := &spinReader{raw: sock, spin: time.Hour, waiting: func() bool { return true }}
	if n, err := r.Read(buf[:]); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if at := sock.parkedAt.Load(); at != 1 {
		t.Fatalf("parked after %d reads, want 1", at)
	}
	// Waiting from the 5th read on: the spin ends there.
	sock = &parkSocket{}
	r = &spinReader{raw: sock, spin: time.Hour, waiting: func() bool { return sock.reads.Load() >= 5 }}
	if n, err := r.Read(buf[:]); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if at := sock.parkedAt.Load(); at != 5 {
		t.Fatalf("parked after %d reads, want 5", at)
	}
	// Not waiting: it spins (here until the 50th read finds data) and
	// never parks.
	sock = &parkSocket{}
	sock.onRead = func(n int64) {
		if n == 50 {
			sock.done.Store(true)
		}
	}
	r = &spinReader{raw: sock, spin: time.Hour, waiting: func() bool { return false }}
	if n, err := r.Read(buf[:]); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if at := sock.parkedAt.Load(); at != 0 || sock.reads.Load() != 50 {
		t.Fatalf("parked after %d reads (0: never), %d reads; want a spin of 50 reads", at, sock.reads.Load())
	}
}

// TestAwaiting: a device awaits while a request it posted lately is
// unanswered (here held by a partition), no longer once the request is
// older than awaitWindow, nor once its answer came.
func TestAwaiting(t *testing.T) {
	opts := options{dialTimeout: 5 * time.Second, keepalive: time.Second}
	a, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(16)
	cqb, _ := b.CreateCQ(16)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	if err := verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	la, _ := pa.AllocMR(64, verbs.AccessAll)
	lb, _ := pb.AllocMR(64, verbs.AccessAll)
	if a.awaiting() || b.awaiting() {
		t.Fatal("awaiting before any request")
	}
	if err := Partition(a, b.Address()); err != nil {
		t.Fatal(err)
	}
	wr := []verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: la.Addr(), Length: 8, LKey: la.LKey()}},
		RemoteAddr: lb.Addr(), RKey: lb.RKey()}}
	if err := qa.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	if !a.awaiting() {
		t.Fatal("not awaiting with a READ unanswered")
	}
	if b.awaiting() {
		t.Fatal("the responder awaits")
	}
	// Unanswered for longer than awaitWindow (as a request the responder
	// discarded would stay): it no longer counts.
	time.Sleep(time.Duration(3 * awaitWindow))
	if a.awaiting() {
		t.Fatal("awaiting a request posted long ago")
	}
	if err := Heal(a, b.Address()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 4)
	n, err := verbs.PollWait(ctx, cqa, wc, verbs.PollAdaptive)
	if err != nil || n != 1 || wc[0].Status != verbs.StatusSuccess {
		t.Fatalf("n=%d err=%v %+v", n, err, wc[:n])
	}
	if a.awaiting() {
		t.Fatal("awaiting after the answer")
	}
}
