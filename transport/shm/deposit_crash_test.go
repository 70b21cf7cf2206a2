package shm_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() { remotedev.Role("depositor", runDepositor) }

// runDepositor (arg: address,qpn,rkey,stage) connects to the QP qpn at
// address, waits for the region rkey to be mapped, and on "go" SENDs
// "first" into it, stalling for good at the deposit's stage.
func runDepositor(arg string) int {
	f := strings.Split(arg, ",")
	qpn, _ := strconv.ParseUint(f[1], 10, 32)
	rkey, _ := strconv.ParseUint(f[2], 10, 32)
	stage, _ := strconv.Atoi(f[3])
	shm.StallDeposits(stage)
	e, err := newEndpoint(fmt.Sprintf("depositor-%d", os.Getpid()), 4096)
	if err == nil {
		err = e.connect(f[0], uint32(qpn))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for !shm.Mapped(e.dev, f[0], uint32(rkey)) {
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("qp %s %d\n", e.dev.Address(), e.qp.QPN())
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	copy(e.mr.Bytes(), "first")
	if err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, SGL: e.local(0, 5)}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

// TestDepositorKilled kills a process in the middle of a deposit into an
// SRQ, at each stage, and sends the next message from another process's
// QP on the same SRQ: the receive the dead depositor was filling is
// neither lost nor completed twice. Killed before its completion was
// published, the deposit is rolled back (the next SEND takes that
// receive); killed after, it is completed (its receive completes with its
// bytes and the next SEND takes the next receive).
func TestDepositorKilled(t *testing.T) {
	for _, stage := range []int{1, 2} {
		t.Run(fmt.Sprintf("stage%d", stage), func(t *testing.T) { depositorKilled(t, stage) })
	}
}

func depositorKilled(t *testing.T, stage int) {
	dev, err := verbs.Open("shm://" + uniqueName("srq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(64)
	srq, err := pd.CreateSRQ(16, 1)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	qp := func() verbs.QP {
		q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, SRQ: srq})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	qp1, qp2 := qp(), qp()
	for i := uint64(0); i < 2; i++ {
		if err := srq.PostRecv([]verbs.RecvWR{{ID: i + 1, SGL: []verbs.SGE{{Addr: mr.Addr() + 64*i, Length: 64, LKey: mr.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	c := startChild(t, "depositor", fmt.Sprintf("%s,%d,%d,%d", dev.Address(), qp1.QPN(), mr.RKey(), stage))
	f := c.line(t, "qp")
	if err := verbs.ConnectRC(qp1, verbs.AccessAll, f[0], uint32(parseU(t, f[1]))); err != nil {
		t.Fatal(err)
	}
	// The other sender, in this process.
	snd := mustEndpoint(t, 4096)
	if err := snd.connect(dev.Address(), qp2.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qp2, verbs.AccessAll, snd.dev.Address(), snd.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	for !shm.Mapped(snd.dev, dev.Address(), mr.RKey()) {
		time.Sleep(time.Millisecond)
	}
	if err := c.Say("go"); err != nil {
		t.Fatal(err)
	}
	c.line(t, "stalled")
	c.kill(t)
	copy(snd.mr.Bytes(), "second")
	if wc := snd.do(t, verbs.SendWR{Opcode: verbs.OpSend, SGL: snd.local(0, 6)}); wc.Status != verbs.StatusSuccess {
		t.Fatalf("SEND after the kill: %+v", wc)
	}
	type recv struct {
		id   uint64
		src  uint32
		data string
	}
	var want []recv
	if stage == 1 {
		want = []recv{{1, snd.qp.QPN(), "second"}}
	} else {
		want = []recv{{1, uint32(parseU(t, f[1])), "first"}, {2, snd.qp.QPN(), "second"}}
	}
	wc := make([]verbs.WC, 8)
	var got []recv
	for deadline := time.Now().Add(10 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:n] {
			if w.Opcode != verbs.WCRecv || w.Status != verbs.StatusSuccess {
				t.Fatalf("completion %+v", w)
			}
			off := 64 * (w.ID - 1)
			got = append(got, recv{w.ID, w.SrcQPN, string(mr.Bytes()[off : off+uint64(w.ByteLen)])})
		}
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if n, _ := cq.Poll(wc); n != 0 {
		t.Fatalf("extra completions %+v", wc[:n])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("receives %+v, want %+v", got, want)
	}
	if left := srq.(interface{ Len() int }).Len(); left != 2-len(want) {
		t.Fatalf("SRQ holds %d receives, want %d", left, 2-len(want))
	}
}
