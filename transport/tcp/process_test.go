package tcp_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

func TestMain(m *testing.M) { remotedev.TestMain(m, remotedev.WithCrash(tcp.Crash)) }

// sharedNode is the node process of the cross-process runs.
var sharedNode remotedev.SharedNode

// crossProcess opens device 0 in this process and devices 1…n-1 in a node
// process: their soft NICs, listeners and links live in the other process,
// and their memory regions are shared memfds.
func crossProcess(node func(testing.TB) *remotedev.Node) remotedev.CrossProcess {
	return remotedev.CrossProcess{
		Label:  "tcp (cross-process)",
		Local:  func() string { return "tcp://127.0.0.1:0" },
		Remote: func() string { return "tcp://127.0.0.1:0?memfd=1" },
		Crash:  tcp.Crash,
		Node:   node,
	}
}

func TestConformanceCrossProcess(t *testing.T) {
	verbstest.Run(t, crossProcess(sharedNode.Get))
}

// TestNodeProcessKilled kills a node process with SIGKILL while this
// process has READs and SENDs outstanding to it: the first completes with
// RETRY_EXC_ERR once the link's connection breaks, the rest with
// RETRY_EXC_ERR or WR_FLUSH_ERR, and the QP moves to ERROR.
func TestNodeProcessKilled(t *testing.T) {
	n, err := remotedev.StartNode()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	devs := crossProcess(func(testing.TB) *remotedev.Node { return n }).Open(t, 2)
	a, b := devs[0], devs[1]
	pa, err := a.AllocPD()
	mustOK(t, err)
	pb, err := b.AllocPD()
	mustOK(t, err)
	cqa, err := a.CreateCQ(1024)
	mustOK(t, err)
	cqb, err := b.CreateCQ(1024)
	mustOK(t, err)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	mustOK(t, err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	mustOK(t, err)
	ma, err := pa.AllocMR(1<<16, verbs.AccessAll)
	mustOK(t, err)
	mb, err := pb.AllocMR(1<<16, verbs.AccessAll)
	mustOK(t, err)
	// qa's retry budget (a minute) is far beyond the test's bound: only
	// the broken connection can fail its requests in time. Its SENDs retry
	// forever for a receive that is never posted, so everything behind the
	// first SEND stays outstanding.
	mustOK(t, qa.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}))
	mustOK(t, qa.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: b.Address(), DestQPN: qb.QPN(), MinRNRTimer: time.Millisecond}))
	mustOK(t, qa.Modify(verbs.QPAttr{State: verbs.StateRTS, RNRRetry: verbs.InfiniteRNRRetry, Timeout: 7 * time.Second, RetryCount: 7}))
	mustOK(t, verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))

	// The memory is shared: a WRITE from this process lands in the node's
	// region and shows in the mapping here.
	copy(ma.Bytes(), "shared")
	mustOK(t, qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: ma.Addr(), Length: 6, LKey: ma.LKey()}}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}}))
	if wc := pollFor(t, cqa, 1, verbstest.WaitTimeout)[0]; wc.ID != 1 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("WRITE: %+v", wc)
	}
	if string(mb.Bytes()[:6]) != "shared" {
		t.Fatalf("node region holds %q after the WRITE", mb.Bytes()[:6])
	}

	const outstanding = 200
	var wrs []verbs.SendWR
	for i := range outstanding {
		id := uint64(100 + i)
		if i%2 == 0 {
			wrs = append(wrs, verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: ma.Addr(), Length: 64, LKey: ma.LKey()}}})
		} else {
			wrs = append(wrs, verbs.SendWR{ID: id, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: ma.Addr() + uint64(64*i), Length: 64, LKey: ma.LKey()}}, RemoteAddr: mb.Addr(), RKey: mb.RKey()})
		}
	}
	mustOK(t, qa.PostSend(wrs))
	// Nothing completes while the first SEND waits for a receive.
	if wcs := pollFor(t, cqa, 1, verbstest.QuietPeriod); len(wcs) != 0 {
		t.Fatalf("completion before the kill: %+v", wcs)
	}

	killed := time.Now()
	n.Process().Kill()
	const bound = 5 * time.Second
	wcs := pollFor(t, cqa, outstanding, bound)
	if len(wcs) != outstanding {
		t.Fatalf("%d of %d outstanding requests completed within %v of the kill", len(wcs), outstanding, bound)
	}
	for i, wc := range wcs {
		if wc.ID != uint64(100+i) {
			t.Fatalf("completion %d has wr_id %d, want %d", i, wc.ID, 100+i)
		}
		if i == 0 && wc.Status != verbs.StatusRetryExcErr {
			t.Fatalf("first outstanding request: %v, want RETRY_EXC_ERR", wc.Status)
		}
		if wc.Status != verbs.StatusRetryExcErr && wc.Status != verbs.StatusWRFlushErr {
			t.Fatalf("outstanding request %d: %v, want RETRY_EXC_ERR or WR_FLUSH_ERR", wc.ID, wc.Status)
		}
	}
	t.Logf("%d outstanding requests failed %v after the kill", outstanding, time.Since(killed).Round(time.Millisecond))
	if s := qa.State(); s != verbs.StateError {
		t.Fatalf("QP in %v after its peer died, want ERROR", s)
	}
	mustOK(t, qa.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: ma.Addr(), Length: 8, LKey: ma.LKey()}}, RemoteAddr: mb.Addr(), RKey: mb.RKey()}}))
	if wc := pollFor(t, cqa, 1, verbstest.WaitTimeout); len(wc) != 1 || wc[0].ID != 7 || wc[0].Status != verbs.StatusWRFlushErr {
		t.Fatalf("request after the failure: %+v, want WR_FLUSH_ERR", wc)
	}

	// The proxies report the dead process instead of hanging, and the
	// region's memory outlives it.
	select {
	case <-n.Client.Done():
	case <-time.After(bound):
		t.Fatal("control connection not closed after the kill")
	}
	if _, err := cqb.Poll(make([]verbs.WC, 4)); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Poll of a dead node's CQ: %v, want ErrClosed", err)
	}
	if err := qb.PostRecv([]verbs.RecvWR{{ID: 1}}); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("PostRecv on a dead node: %v, want ErrClosed", err)
	}
	if string(mb.Bytes()[:6]) != "shared" {
		t.Fatalf("region of the dead node holds %q", mb.Bytes()[:6])
	}
	<-n.Exited()
	if ws, ok := n.ProcessState().Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("node process ended with %v, want SIGKILL", n.ProcessState())
	}
}

// mustOK fails the test on error.
func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pollFor polls cq until it has n completions or d passes.
func pollFor(t testing.TB, cq verbs.CQ, n int, d time.Duration) []verbs.WC {
	t.Helper()
	var out []verbs.WC
	buf := make([]verbs.WC, 64)
	deadline := time.Now().Add(d)
	for len(out) < n && time.Now().Before(deadline) {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return out
}
