package tcp

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// slowConn reads at most 64 KiB per millisecond: a responder that cannot
// keep up with its requesters.
type slowConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *slowConn) Read(b []byte) (int, error) {
	time.Sleep(time.Millisecond)
	n, err := c.Conn.Read(b[:min(len(b), 64<<10)])
	c.read.Add(int64(n))
	return n, err
}

// TestSlowConsumer: against a slow responder the requester's memory stays
// bounded — posting blocks on the link instead of queueing without limit —
// and every request still completes successfully.
func TestSlowConsumer(t *testing.T) {
	const size = 1 << 20
	a, err := listen("127.0.0.1:0", "", options{dialTimeout: 5 * time.Second, keepalive: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var read atomic.Int64
	b, err := listen("127.0.0.1:0", "", options{dialTimeout: 5 * time.Second, keepalive: time.Second,
		wrapConn: func(c net.Conn) net.Conn { return &slowConn{Conn: c, read: &read} }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(1024)
	cqb, _ := b.CreateCQ(16)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa, Cap: verbs.QPCap{MaxSendWR: 512}})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	if err := verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	la, _ := pa.AllocMR(size, verbs.AccessAll)
	lb, _ := pb.AllocMR(size, verbs.AccessAll)

	wrs := make([]verbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite,
			SGL:        []verbs.SGE{{Addr: la.Addr(), Length: size, LKey: la.LKey()}},
			RemoteAddr: lb.Addr(), RKey: lb.RKey()}
	}
	wrs[len(wrs)-1].Flags = verbs.FlagSignaled
	var before, now runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 16)
	posted, completed := 0, 0
	var peak uint64
	for posted < 16 { // 128 MiB through a 64 MiB/s consumer
		err := qa.PostSend(wrs)
		if errors.Is(err, verbs.ErrQueueFull) {
			n, err := verbs.PollWait(ctx, cqa, wc, verbs.PollAdaptive)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wc[:n] {
				if w.Status != verbs.StatusSuccess {
					t.Fatalf("completion %+v", w)
				}
			}
			completed += n
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		posted++
		runtime.ReadMemStats(&now)
		peak = max(peak, now.HeapInuse)
	}
	for completed < posted {
		n, err := verbs.PollWait(ctx, cqa, wc, verbs.PollAdaptive)
		if err != nil {
			t.Fatalf("after %d of %d: %v", completed, posted, err)
		}
		for _, w := range wc[:n] {
			if w.Status != verbs.StatusSuccess {
				t.Fatalf("completion %+v", w)
			}
		}
		completed += n
	}
	grown := int64(peak) - int64(before.HeapInuse)
	t.Logf("heap grew by at most %.1f MiB while %d MiB went through a slow responder", float64(grown)/(1<<20), read.Load()>>20)
	if grown > 3*maxPending+8<<20 {
		t.Fatalf("heap grew by %d MiB: back-pressure does not bound the queued bytes", grown>>20)
	}
}
