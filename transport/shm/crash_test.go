package shm_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	remotedev.Role("target", runTarget)
	remotedev.Role("holder", runHolder)
	remotedev.Role("sender", runSender)
}

// endpoint is a device with one RC QP, one CQ and one region.
type endpoint struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
}

func newEndpoint(name string, size int) (*endpoint, error) {
	dev, err := verbs.Open("shm://" + name)
	if err != nil {
		return nil, err
	}
	e := &endpoint{dev: dev}
	if e.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if e.cq, err = dev.CreateCQ(4096); err != nil {
		return nil, err
	}
	if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: verbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 2048}}); err != nil {
		return nil, err
	}
	if e.mr, err = e.pd.AllocMR(size, verbs.AccessAll); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *endpoint) connect(addr string, qpn uint32) error {
	return verbs.ConnectRC(e.qp, verbs.AccessAll, addr, qpn)
}

// mustEndpoint opens an endpoint for a test, closed at its end.
func mustEndpoint(t *testing.T, size int) *endpoint {
	t.Helper()
	e, err := newEndpoint(uniqueName("ep"), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.dev.Close() })
	return e
}

// do posts one work request and waits for its completion.
func (e *endpoint) do(t *testing.T, wr verbs.SendWR) verbs.WC {
	t.Helper()
	wr.Flags |= verbs.FlagSignaled
	if err := e.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	for {
		n, err := verbs.PollWait(ctx, e.cq, wc, verbs.PollAdaptive)
		if err != nil {
			t.Fatalf("%v: %v", wr.Opcode, err)
		}
		if n == 1 && wc[0].Opcode != verbs.WCRecv {
			return wc[0]
		}
	}
}

// local is an SGE over n bytes of e's region at off.
func (e *endpoint) local(off uint64, n uint32) []verbs.SGE {
	return []verbs.SGE{{Addr: e.mr.Addr() + off, Length: n, LKey: e.mr.LKey()}}
}

func (e *endpoint) word(off uint64) uint64 {
	return binary.NativeEndian.Uint64(e.mr.Bytes()[off:])
}

func (e *endpoint) setWord(off, v uint64) {
	binary.NativeEndian.PutUint64(e.mr.Bytes()[off:], v)
}

// child is a running child process speaking lines on stdin/stdout,
// killed at the end of the test.
type child struct{ *remotedev.Child }

func startChild(t *testing.T, role, arg string) child {
	t.Helper()
	c, err := remotedev.StartChild(role, arg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kill(10 * time.Second) })
	return child{c}
}

// line reads the next line of the child's output, which must start with
// prefix, and returns its fields after the prefix.
func (c child) line(t *testing.T, prefix string) []string {
	t.Helper()
	f, err := c.Expect(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (c child) kill(t *testing.T) {
	t.Helper()
	if err := c.Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func parseU(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// runTarget is a child that owns a region and a QP, connects to the peer
// named on stdin, and then does nothing until stdin closes; it then prints
// its region's first 64 bytes.
func runTarget(string) int {
	e, err := newEndpoint(fmt.Sprintf("target-%d", os.Getpid()), 4096)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; i < 8; i++ {
		e.setWord(uint64(8*i), uint64(100+i))
	}
	fmt.Printf("target %s %d %#x %#x\n", e.dev.Address(), e.qp.QPN(), e.mr.Addr(), e.mr.RKey())
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return 1
	}
	f := strings.Fields(in.Text())
	qpn, _ := strconv.ParseUint(f[1], 10, 32)
	if err := e.connect(f[0], uint32(qpn)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("connected")
	for in.Scan() {
	}
	fmt.Printf("final %x\n", e.mr.Bytes()[:64])
	return 0
}

// TestTargetTakesNoPart stops the target process (SIGSTOP: none of its
// goroutines runs) and completes READ, WRITE, CAS, FAA and a masked CAS
// on its memory anyway: the initiator executes them on the mapping.
func TestTargetTakesNoPart(t *testing.T) {
	c := startChild(t, "target", "")
	f := c.line(t, "target")
	tAddr, tQPN, mrAddr, rkey := f[0], uint32(parseU(t, f[1])), parseU(t, f[2]), uint32(parseU(t, f[3]))
	e := mustEndpoint(t, 4096)
	if err := e.connect(tAddr, tQPN); err != nil {
		t.Fatal(err)
	}
	if err := c.Say(fmt.Sprintf("%s %d", e.dev.Address(), e.qp.QPN())); err != nil {
		t.Fatal(err)
	}
	c.line(t, "connected")
	waitMapped(t, e.dev, tAddr, rkey)

	if err := c.Process().Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	read := func(off uint64) uint64 {
		if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpRead, SGL: e.local(512, 8), RemoteAddr: mrAddr + off, RKey: rkey}); wc.Status != verbs.StatusSuccess {
			t.Fatalf("READ: %v", wc.Status)
		}
		return e.word(512)
	}
	if v := read(0); v != 100 {
		t.Fatalf("READ got %d, want 100", v)
	}
	e.setWord(0, 7777)
	if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpWrite, SGL: e.local(0, 8), RemoteAddr: mrAddr + 8, RKey: rkey}); wc.Status != verbs.StatusSuccess {
		t.Fatalf("WRITE: %v", wc.Status)
	}
	if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: e.local(16, 8), RemoteAddr: mrAddr + 16, RKey: rkey,
		Atomic: verbs.AtomicArgs{Compare: [4]uint64{102}, Swap: [4]uint64{202}}}); wc.Status != verbs.StatusSuccess || e.word(16) != 102 {
		t.Fatalf("CAS: %v, original %d", wc.Status, e.word(16))
	}
	if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpAtomicFetchAndAdd, SGL: e.local(24, 8), RemoteAddr: mrAddr + 24, RKey: rkey,
		Atomic: verbs.AtomicArgs{Swap: [4]uint64{5}}}); wc.Status != verbs.StatusSuccess || e.word(24) != 103 {
		t.Fatalf("FAA: %v, original %d", wc.Status, e.word(24))
	}
	if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, SGL: e.local(32, 16), RemoteAddr: mrAddr + 32, RKey: rkey,
		Atomic: verbs.AtomicArgs{Size: 16, Compare: [4]uint64{104, 105}, CompareMask: [4]uint64{^uint64(0), ^uint64(0)},
			Swap: [4]uint64{304, 305}, SwapMask: [4]uint64{^uint64(0), ^uint64(0)}}}); wc.Status != verbs.StatusSuccess {
		t.Fatalf("masked CAS: %v", wc.Status)
	}
	for off, want := range map[uint64]uint64{8: 7777, 16: 202, 24: 108, 32: 304, 40: 305} {
		if v := read(off); v != want {
			t.Errorf("word at %d = %d after the operations, want %d", off, v, want)
		}
	}
	if err := c.Process().Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.CloseInput()
	got := c.line(t, "final")[0]
	var want [64]byte
	for i, v := range []uint64{100, 7777, 202, 108, 304, 305, 106, 107} {
		binary.NativeEndian.PutUint64(want[8*i:], v)
	}
	if got != fmt.Sprintf("%x", want) {
		t.Errorf("target sees %s, want %x", got, want)
	}
}

// runHolder is a child that takes an atomics stripe of the region rkey at
// addr on the device peer and stops half-way through a 32-byte atomic,
// then waits to be killed.
func runHolder(arg string) int {
	f := strings.Split(arg, ",")
	rkey, _ := strconv.ParseUint(f[1], 0, 32)
	addr, _ := strconv.ParseUint(f[2], 0, 64)
	dev, err := verbs.Open("shm://" + fmt.Sprintf("holder-%d", os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := shm.HoldStripe(dev, f[0], uint32(rkey), addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("held")
	select {}
}

// TestCrashWhileHoldingAtomicsLock kills a process that holds an atomics
// stripe of a node half-way through a 32-byte atomic: the next atomic on
// the stripe, by another peer, completes, and sees the torn words undone.
func TestCrashWhileHoldingAtomicsLock(t *testing.T) {
	node := mustEndpoint(t, 4096)
	for i := 0; i < 4; i++ {
		node.setWord(uint64(64+8*i), uint64(i+1))
	}
	addr := node.mr.Addr() + 64
	c := startChild(t, "holder", fmt.Sprintf("%s,%#x,%#x", node.dev.Address(), node.mr.RKey(), addr))
	c.line(t, "held")
	if node.word(64) != ^uint64(0) {
		t.Fatalf("the holder did not tear the words (word 0 = %#x)", node.word(64))
	}
	c.kill(t)

	peer := mustEndpoint(t, 4096)
	if err := peer.connect(node.dev.Address(), node.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := node.connect(peer.dev.Address(), peer.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	waitMapped(t, peer.dev, node.dev.Address(), node.mr.RKey())
	start := time.Now()
	wc := peer.do(t, verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, SGL: peer.local(0, 32), RemoteAddr: addr, RKey: node.mr.RKey(),
		Atomic: verbs.AtomicArgs{Size: 32, Compare: [4]uint64{1, 2, 3, 4}, CompareMask: [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)},
			Swap: [4]uint64{9, 9, 9, 9}, SwapMask: [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}}})
	if wc.Status != verbs.StatusSuccess {
		t.Fatalf("masked CAS after the holder died: %v", wc.Status)
	}
	t.Logf("the stripe was recovered in %v", time.Since(start))
	for i := 0; i < 4; i++ {
		if got := peer.word(uint64(8 * i)); got != uint64(i+1) {
			t.Errorf("original word %d = %#x, want %d (the torn atomic was not undone)", i, got, i+1)
		}
		if got := node.word(uint64(64 + 8*i)); got != 9 {
			t.Errorf("word %d = %#x after the CAS, want 9", i, got)
		}
	}
}

// runSender is a child that connects a QP to the node QP named by arg
// (address,qpn), prints its own, and once told "go" posts SENDs as fast as
// it can until it is killed.
func runSender(arg string) int {
	f := strings.Split(arg, ",")
	qpn, _ := strconv.ParseUint(f[1], 10, 32)
	e, err := newEndpoint(fmt.Sprintf("sender-%d", os.Getpid()), 4096)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := e.connect(f[0], uint32(qpn)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("qp %s %d\n", e.dev.Address(), e.qp.QPN())
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	wrs := make([]verbs.SendWR, 16)
	for i := range wrs {
		wrs[i] = verbs.SendWR{Opcode: verbs.OpSend, SGL: e.local(0, 64)}
	}
	wrs[15].Flags = verbs.FlagSignaled
	wc := make([]verbs.WC, 64)
	for {
		if err := e.qp.PostSend(wrs); err != nil {
			time.Sleep(10 * time.Microsecond)
		}
		e.cq.Poll(wc)
	}
}

// TestPeerKilledMidTraffic kills a peer while it streams SENDs into a
// node (so at any instant of a ring update): the node keeps serving other
// peers, and the node's QP to the dead peer fails instead of hanging.
func TestPeerKilledMidTraffic(t *testing.T) {
	node := mustEndpoint(t, 1<<16)
	recvs := make([]verbs.RecvWR, 2048)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: node.local(uint64(i%256)*64, 64)}
	}
	c := startChild(t, "sender", fmt.Sprintf("%s,%d", node.dev.Address(), node.qp.QPN()))
	f := c.line(t, "qp")
	if err := node.connect(f[0], uint32(parseU(t, f[1]))); err != nil {
		t.Fatal(err)
	}
	if err := node.qp.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	if err := c.Say("go"); err != nil {
		t.Fatal(err)
	}
	// Consume and re-post receives for a while, then kill the sender.
	wc := make([]verbs.WC, 64)
	got := 0
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
		n, err := node.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if wc[i].Status != verbs.StatusSuccess {
				t.Fatalf("receive %+v", wc[i])
			}
			if err := node.qp.PostRecv([]verbs.RecvWR{{ID: wc[i].ID, SGL: node.local(wc[i].ID%256*64, 64)}}); err != nil {
				t.Fatal(err)
			}
		}
		got += n
	}
	if got == 0 {
		t.Fatal("no SEND from the sender arrived")
	}
	c.kill(t)

	// The node's QP to the dead peer fails when used.
	st := node.do(t, verbs.SendWR{Opcode: verbs.OpRead, SGL: node.local(0, 8), RemoteAddr: 0, RKey: 1}).Status
	if st != verbs.StatusRetryExcErr && st != verbs.StatusRemAccessErr {
		t.Errorf("READ to the dead peer completed with %v, want RETRY_EXC_ERR", st)
	}
	if s := node.qp.State(); s != verbs.StateError {
		t.Errorf("node QP to the dead peer is %v, want ERROR", s)
	}

	// Another peer is served as before.
	other := mustEndpoint(t, 4096)
	nq, err := node.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: node.cq, RecvCQ: node.cq})
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(nq, verbs.AccessAll, other.dev.Address(), other.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := other.connect(node.dev.Address(), nq.QPN()); err != nil {
		t.Fatal(err)
	}
	node.setWord(0, 4242)
	if wc := other.do(t, verbs.SendWR{Opcode: verbs.OpRead, SGL: other.local(0, 8), RemoteAddr: node.mr.Addr(), RKey: node.mr.RKey()}); wc.Status != verbs.StatusSuccess || other.word(0) != 4242 {
		t.Fatalf("READ by another peer after the crash: %v, %d", wc.Status, other.word(0))
	}
	if err := nq.PostRecv([]verbs.RecvWR{{ID: 1, SGL: node.local(1024, 64)}}); err != nil {
		t.Fatal(err)
	}
	if wc := other.do(t, verbs.SendWR{Opcode: verbs.OpSend, SGL: other.local(0, 8)}); wc.Status != verbs.StatusSuccess {
		t.Fatalf("SEND by another peer after the crash: %v", wc.Status)
	}
}
