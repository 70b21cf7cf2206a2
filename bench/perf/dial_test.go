package perf_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench/perf"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// remoteServer is a minimal memory server: every cm client gets a QP, the
// descriptor of one region and, for SENDs, receives that are re-posted
// (and, with echo, messages sent back).
// It returns the cm address and the loop fabric.
func remoteServer(tb testing.TB, echo bool) (string, string) {
	tb.Helper()
	fabric := fmt.Sprintf("loop://perfdial%d", fabricSeq.Add(1))
	dev, err := verbs.Open(fabric + "/server")
	if err != nil {
		tb.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	mr, err := pd.AllocMR(64<<10, verbs.AccessAll)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := cm.Listen(context.Background(), dev, "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tb.Cleanup(func() {
		cancel()
		l.Close()
		<-done
		dev.Close()
	})
	go func() {
		defer close(done)
		for {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			cq, _ := dev.CreateCQ(1024)
			buf, _ := pd.AllocMR(4096, verbs.AccessLocalWrite)
			conn, err := req.Accept(ctx, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Access: verbs.AccessAll,
				Cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256}, PrivateData: cm.EncodeDescs([]cm.MRDesc{cm.DescOf(mr)})})
			if err != nil {
				continue
			}
			qp := conn.QP()
			recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: buf.Addr(), Length: 4096, LKey: buf.LKey()}}}}
			for range 256 {
				qp.PostRecv(recv)
			}
			go func() {
				wc := make([]verbs.WC, 64)
				pong := []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
					SGL: []verbs.SGE{{Addr: buf.Addr(), LKey: buf.LKey()}}}}
				for {
					n, err := verbs.PollWait(ctx, cq, wc, verbs.PollEvent)
					if err != nil {
						return
					}
					for i := range n {
						if wc[i].Status != verbs.StatusSuccess || wc[i].Opcode != verbs.WCRecv {
							continue
						}
						if echo {
							pong[0].SGL[0].Length = wc[i].ByteLen
							qp.PostSend(pong)
						}
						qp.PostRecv(recv)
					}
				}
			}()
		}
	}()
	return l.Addr(), fabric
}

// dialPair starts a remoteServer and dials it.
func dialPair(tb testing.TB, echo bool) *perf.Pair { return dialPairWith(tb, echo, false) }

// dialPairWith is dialPair; single makes the client SingleThreaded.
func dialPairWith(tb testing.TB, echo, single bool) *perf.Pair {
	tb.Helper()
	addr, fabric := remoteServer(tb, echo)
	p, err := perf.Dial(context.Background(), perf.Config{Client: fabric + "/client",
		Poll: verbs.PollBusy, Window: 32, MaxSize: 1 << 20, SingleThreaded: single}, addr, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

func TestDialEveryCell(t *testing.T) {
	t.Run("locked", func(t *testing.T) { testDialEveryCell(t, false) })
	t.Run("single", func(t *testing.T) { testDialEveryCell(t, true) })
}

func testDialEveryCell(t *testing.T, single bool) {
	p := dialPairWith(t, true, single)
	if c := p.Config(); c.MaxSize != 64<<10 || c.Server == "" || p.Remote().Len != 64<<10 {
		t.Fatalf("config %+v, remote %v", c, p.Remote())
	}
	pl := &perf.Plan{Ops: perf.Ops, Tests: []perf.Test{perf.Lat, perf.BW}, Sizes: []int{8, 4096}, Stop: perf.Stop{Iters: 300}}
	ms, err := p.Run(context.Background(), pl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3*2*2+2*2 {
		t.Fatalf("%d measurements", len(ms))
	}
	for _, m := range ms {
		if m.Iters != 300 || m.Rate() <= 0 {
			t.Errorf("%v %v %d: iters=%d rate=%v", m.Op, m.Test, m.Size, m.Iters, m.Rate())
		}
	}
	if _, err := p.Measure(context.Background(), perf.Cell{Op: perf.Read, Test: perf.Lat, Size: 128 << 10}, perf.Stop{Iters: 1}); err == nil {
		t.Error("a message larger than the remote region was accepted")
	}
}

func TestDialNoEcho(t *testing.T) {
	old := perf.EchoTimeout
	perf.EchoTimeout = 100 * time.Millisecond
	defer func() { perf.EchoTimeout = old }()
	p := dialPair(t, false)
	if _, err := p.Measure(context.Background(), perf.Cell{Op: perf.Send, Test: perf.Lat, Size: 8}, perf.Stop{Iters: 10}); !errors.Is(err, perf.ErrNoEcho) {
		t.Errorf("SEND latency without echo: %v", err)
	}
	m, err := p.Measure(context.Background(), perf.Cell{Op: perf.Send, Test: perf.BW, Size: 8}, perf.Stop{Iters: 2000})
	if err != nil || m.Iters != 2000 {
		t.Errorf("SEND bandwidth without echo: %v %d", err, m.Iters)
	}
}

func TestDialMeasuredLoopAllocatesNothing(t *testing.T) {
	checkLoopAllocs(t, dialPair(t, true), 3000)
	checkLoopAllocs(t, dialPairWith(t, true, true), 1000)
}

func TestDialErrors(t *testing.T) {
	if _, err := perf.Dial(context.Background(), perf.Config{Client: "loop://dialerr/client"}, "127.0.0.1:1", nil); err == nil {
		t.Error("dial to a closed port succeeded")
	}
	// The client device was closed again: the same URI opens.
	if _, err := perf.Dial(context.Background(), perf.Config{Client: "loop://dialerr/client"}, "127.0.0.1:1", nil); err == nil {
		t.Error("dial to a closed port succeeded")
	}
}
