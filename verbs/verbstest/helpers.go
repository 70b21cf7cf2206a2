package verbstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// node is an opened device with a PD and a CQ.
type node struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
}

// openNodes opens n devices through p, registers their Close with
// t.Cleanup and gives each a PD and a CQ.
func openNodes(t testing.TB, p Provider, n int) []*node {
	t.Helper()
	devs := p.Open(t, n)
	if len(devs) != n {
		t.Fatalf("%s: Open(%d) returned %d devices", p.Name(), n, len(devs))
	}
	nodes := make([]*node, n)
	for i, d := range devs {
		if d == nil {
			t.Fatalf("%s: Open returned a nil device", p.Name())
		}
		t.Cleanup(func() { d.Close() })
		pd, err := d.AllocPD()
		if err != nil {
			t.Fatalf("AllocPD: %v", err)
		}
		cq, err := d.CreateCQ(min(4096, d.Attr().MaxCQE))
		if err != nil {
			t.Fatalf("CreateCQ: %v", err)
		}
		nodes[i] = &node{dev: d, pd: pd, cq: cq}
	}
	return nodes
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mr allocates a region on the node's PD.
func (n *node) mr(t testing.TB, size int, access verbs.Access) verbs.MR {
	t.Helper()
	m, err := n.pd.AllocMR(size, access)
	if err != nil {
		t.Fatalf("AllocMR(%d, %v): %v", size, access, err)
	}
	return m
}

// newCQ creates an extra CQ on the node.
func (n *node) newCQ(t testing.TB, depth int) verbs.CQ {
	t.Helper()
	cq, err := n.dev.CreateCQ(depth)
	if err != nil {
		t.Fatalf("CreateCQ(%d): %v", depth, err)
	}
	return cq
}

// qpOpts configure node.qp.
type qpOpts struct {
	typ       verbs.QPType // RC when zero
	cap       verbs.QPCap
	signalAll bool
	srq       verbs.SRQ
	cq        verbs.CQ // the node's CQ when nil
	pd        verbs.PD // the node's PD when nil
	single    bool     // QPInitAttr.SingleThreaded
}

// qp creates a QP in RESET.
func (n *node) qp(t testing.TB, o qpOpts) verbs.QP {
	t.Helper()
	if o.typ == 0 {
		o.typ = verbs.RC
	}
	if o.cq == nil {
		o.cq = n.cq
	}
	pd := o.pd
	if pd == nil {
		pd = n.pd
	}
	q, err := pd.CreateQP(verbs.QPInitAttr{Type: o.typ, SendCQ: o.cq, RecvCQ: o.cq, SRQ: o.srq, Cap: o.cap, SignalAll: o.signalAll,
		SingleThreaded: o.single})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	return q
}

// connOpts are the attributes connect applies.
type connOpts struct {
	access     verbs.Access // QP responder access (INIT)
	minRNR     time.Duration
	rnrRetry   int
	timeout    time.Duration
	retryCount int
}

// connect moves an RC QP from RESET to RTS connected to peerQPN at peer.
func connect(t testing.TB, q verbs.QP, peer verbs.Device, peerQPN uint32, o connOpts) {
	t.Helper()
	must(t, q.Modify(verbs.QPAttr{State: verbs.StateInit, Access: o.access}))
	must(t, q.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: peer.Address(), DestQPN: peerQPN, MinRNRTimer: o.minRNR}))
	must(t, q.Modify(verbs.QPAttr{State: verbs.StateRTS, RNRRetry: o.rnrRetry, Timeout: o.timeout, RetryCount: o.retryCount}))
	if s := q.State(); s != verbs.StateRTS {
		t.Fatalf("QP in %v after connecting, want RTS", s)
	}
}

// pair is two connected RC QPs, qa on node a and qb on node b, with a
// 4 KiB region of every access on each side.
type pair struct {
	nodes  []*node
	a, b   *node
	qa, qb verbs.QP
	ma, mb verbs.MR
}

// pairOpts configure newPair.
type pairOpts struct {
	nodes     int // devices to open, at least 2 (a and b are the first two)
	capA      verbs.QPCap
	capB      verbs.QPCap
	signalAll bool
	connA     connOpts     // requester attributes of qa (access is forced to AccessAll)
	connB     connOpts     // attributes of qb (access is AccessAll &^ denyB)
	denyB     verbs.Access // remote access qb does not allow
	mrSize    int          // 4096 when zero
}

func newPair(t testing.TB, p Provider, o pairOpts) *pair {
	t.Helper()
	n := max(o.nodes, 2)
	nodes := openNodes(t, p, n)
	size := o.mrSize
	if size == 0 {
		size = 4096
	}
	pr := &pair{nodes: nodes, a: nodes[0], b: nodes[1]}
	pr.qa = pr.a.qp(t, qpOpts{cap: o.capA, signalAll: o.signalAll})
	pr.qb = pr.b.qp(t, qpOpts{cap: o.capB})
	o.connA.access = verbs.AccessAll
	o.connB.access = verbs.AccessAll &^ o.denyB
	connect(t, pr.qa, pr.b.dev, pr.qb.QPN(), o.connA)
	connect(t, pr.qb, pr.a.dev, pr.qa.QPN(), o.connB)
	pr.ma = pr.a.mr(t, size, verbs.AccessAll)
	pr.mb = pr.b.mr(t, size, verbs.AccessAll)
	return pr
}

// sg names n bytes at offset off of m.
func sg(m verbs.MR, off, n int) verbs.SGE {
	return verbs.SGE{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

// rdma builds a signaled one-sided request on remote region r at offset
// roff with the given local scatter/gather list.
func rdma(id uint64, op verbs.Opcode, r verbs.MR, roff int, sgl ...verbs.SGE) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: op, Flags: verbs.FlagSignaled, SGL: sgl, RemoteAddr: r.Addr() + uint64(roff), RKey: r.RKey()}
}

// send builds a signaled SEND.
func send(id uint64, sgl ...verbs.SGE) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: sgl}
}

// cas builds a signaled 8-byte compare-and-swap returning into res.
func cas(id uint64, r verbs.MR, roff int, res verbs.SGE, compare, swap uint64) verbs.SendWR {
	w := rdma(id, verbs.OpAtomicCmpAndSwp, r, roff, res)
	w.Atomic.Compare[0], w.Atomic.Swap[0] = compare, swap
	return w
}

// faa builds a signaled 8-byte fetch-and-add returning into res.
func faa(id uint64, r verbs.MR, roff int, res verbs.SGE, add uint64) verbs.SendWR {
	w := rdma(id, verbs.OpAtomicFetchAndAdd, r, roff, res)
	w.Atomic.Swap[0] = add
	return w
}

// masked builds a signaled masked atomic of a.Size bytes.
func masked(id uint64, op verbs.Opcode, r verbs.MR, roff int, res verbs.SGE, a verbs.AtomicArgs) verbs.SendWR {
	w := rdma(id, op, r, roff, res)
	w.Atomic = a
	return w
}

// post posts wrs and fails the test on error.
func post(t testing.TB, q verbs.QP, wrs ...verbs.SendWR) {
	t.Helper()
	if err := q.PostSend(wrs); err != nil {
		t.Fatalf("PostSend: %v", err)
	}
}

// receiver is a QP or an SRQ.
type receiver interface {
	PostRecv([]verbs.RecvWR) error
}

// postRecv posts one receive and fails the test on error.
func postRecv(t testing.TB, r receiver, id uint64, sgl ...verbs.SGE) {
	t.Helper()
	if err := r.PostRecv([]verbs.RecvWR{{ID: id, SGL: sgl}}); err != nil {
		t.Fatalf("PostRecv: %v", err)
	}
}

// wantPostErr checks that err is a *verbs.PostError at index idx wrapping
// sentinel.
func wantPostErr(t testing.TB, err error, idx int, sentinel error) {
	t.Helper()
	if err == nil {
		t.Fatalf("post succeeded, want a *verbs.PostError wrapping %v", sentinel)
	}
	var pe *verbs.PostError
	if !errors.As(err, &pe) {
		t.Fatalf("post error %v (%T) is not a *verbs.PostError", err, err)
	}
	if pe.Index != idx {
		t.Errorf("PostError.Index = %d, want %d (%v)", pe.Index, idx, err)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("post error %v does not wrap %v", err, sentinel)
	}
}

// pollN polls cq until it has n completions or WaitTimeout passes.
func pollN(cq verbs.CQ, n int) ([]verbs.WC, error) {
	out := make([]verbs.WC, 0, n)
	buf := make([]verbs.WC, 64)
	deadline := time.Now().Add(WaitTimeout)
	for idle := 0; len(out) < n; {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		out = append(out, buf[:k]...)
		if err != nil {
			return out, fmt.Errorf("poll after %d of %d completions: %w", len(out), n, err)
		}
		if k > 0 {
			idle = 0
			continue
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("timed out after %v with %d of %d completions: %s", WaitTimeout, len(out), n, fmtWCs(out))
		}
		if idle++; idle < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return out, nil
}

// waitN returns the next n completions of cq, failing the test when they
// do not arrive within WaitTimeout.
func waitN(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	wcs, err := pollN(cq, n)
	if err != nil {
		t.Fatal(err)
	}
	return wcs
}

// wait1 returns the next completion of cq.
func wait1(t testing.TB, cq verbs.CQ) verbs.WC {
	t.Helper()
	return waitN(t, cq, 1)[0]
}

// quiet fails the test if cq yields a completion within QuietPeriod.
func quiet(t testing.TB, cq verbs.CQ) {
	t.Helper()
	var wc [4]verbs.WC
	deadline := time.Now().Add(QuietPeriod)
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		if n > 0 {
			t.Fatalf("unexpected completion(s): %s", fmtWCs(wc[:n]))
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func fmtWCs(wcs []verbs.WC) string {
	s := "["
	for i, w := range wcs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("{id=%d %v %v len=%d}", w.ID, w.Status, w.Opcode, w.ByteLen)
	}
	return s + "]"
}

// check verifies a completion's wr_id and status.
func check(t testing.TB, wc verbs.WC, id uint64, st verbs.Status) {
	t.Helper()
	if wc.ID != id || wc.Status != st {
		t.Fatalf("completion id=%d status=%v, want id=%d status=%v (%s)", wc.ID, wc.Status, id, st, fmtWCs([]verbs.WC{wc}))
	}
}

// checkOp verifies a successful completion's wr_id and opcode.
func checkOp(t testing.TB, wc verbs.WC, id uint64, op verbs.WCOpcode) {
	t.Helper()
	check(t, wc, id, verbs.StatusSuccess)
	if wc.Opcode != op {
		t.Fatalf("completion %d opcode %v, want %v", id, wc.Opcode, op)
	}
}

// expect posts wrs and checks that the first completion of q's CQ has
// wr_id wrs[0].ID and status st.
func expect(t testing.TB, q verbs.QP, cq verbs.CQ, st verbs.Status, wrs ...verbs.SendWR) verbs.WC {
	t.Helper()
	post(t, q, wrs...)
	wc := wait1(t, cq)
	check(t, wc, wrs[0].ID, st)
	return wc
}

// waitState waits until q reaches state s.
func waitState(t testing.TB, q verbs.QP, s verbs.QPState) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for q.State() != s {
		if time.Now().After(deadline) {
			t.Fatalf("QP %d in %v after %v, want %v", q.QPN(), q.State(), WaitTimeout, s)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// u64 reads the native-endian word at b[off:].
func u64(b []byte, off int) uint64 { return binary.NativeEndian.Uint64(b[off:]) }

// put64 stores the native-endian word v at b[off:].
func put64(b []byte, off int, v uint64) { binary.NativeEndian.PutUint64(b[off:], v) }

// fill sets b[i] = seed + i.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i)
	}
}

// equal fails the test when got != want.
func equal(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		t.Fatalf("%s = %x, want %x", what, got, want)
	}
}

// zero fails the test unless b is all zero.
func zero(t testing.TB, what string, b []byte) {
	t.Helper()
	for i, c := range b {
		if c != 0 {
			t.Fatalf("%s: byte %d is %#x, want untouched zero", what, i, c)
		}
	}
}

// checkSource asserts that a receive's SrcID names the sending device: an
// address handle made from the completion reaches the sender.
func checkSource(t testing.TB, pd verbs.PD, wc *verbs.WC, sender verbs.Device) {
	t.Helper()
	ah, err := pd.CreateAHFromWC(wc)
	if err != nil {
		t.Fatalf("CreateAHFromWC(%+v): %v", wc, err)
	}
	if ah.Address() != sender.Address() {
		t.Fatalf("receive's SrcID %d names %q, want the sender %q", wc.SrcID, ah.Address(), sender.Address())
	}
}
