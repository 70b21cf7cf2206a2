package nic

import (
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

// stubNet resolves every address to a target with that address: enough
// to connect QPs whose requests a test feeds to a Session by hand.
type stubNet struct{}

type stubTarget string

func (t stubTarget) Address() string             { return string(t) }
func (stubNet) Resolve(a string) (Target, error) { return stubTarget(a), nil }
func (stubNet) ResolveID(uint32) (Target, error) { return stubTarget(""), nil }
func (stubNet) Route(*Node, Target) Route        { return Route{} }
func (r *recorder) Respond(resp *Response)       { r.got = append(r.got, *resp) }
func (r *recorder) last() Response               { return r.got[len(r.got)-1] }
func (r *recorder) reset()                       { r.got = r.got[:0] }
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type recorder struct{ got []Response }

// isoNode is a node with one RC QP connected to QP peerQPN of the node at
// peerAddr, and a region holding "victim!!".
func isoNode(t *testing.T, peerAddr string, peerQPN uint32) (*Node, *QP, *MR) {
	t.Helper()
	n := NewNode(Config{Address: "test://responder", Network: stubNet{}})
	t.Cleanup(func() { n.Close() })
	pd, _ := n.AllocPD()
	cq, _ := n.CreateCQ(16)
	q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	must(t, err)
	must(t, verbs.ConnectRC(q, verbs.AccessAll, peerAddr, peerQPN))
	m, err := pd.AllocMR(64, verbs.AccessAll)
	must(t, err)
	copy(m.Bytes(), "victim!!")
	return n, q.(*QP), m.(*MR)
}

// TestSessionServesOnlyConnectedPeer: a session serves a request only when
// it comes from the node and QP the named QP is connected to; anything
// else is dropped (RespDrop, nothing executed) and counted.
func TestSessionServesOnlyConnectedPeer(t *testing.T) {
	n, q, m := isoNode(t, "test://peer", 42)
	read := func(s *Session, src, dst uint32, seq uint32) Response {
		var w recorder
		s.Serve(&Request{SrcQPN: src, DstQPN: dst, Epoch: 1, Seq: seq, Opcode: verbs.OpRead,
			RKey: m.RKey(), RemoteAddr: m.Addr(), Length: 8}, &w)
		if len(w.got) != 1 {
			t.Fatalf("%d responses to one request", len(w.got))
		}
		return w.last()
	}
	write := func(s *Session, src uint32, seq uint32, addr uint64) Response {
		var w recorder
		s.Serve(&Request{SrcQPN: src, DstQPN: q.QPN(), Epoch: 1, Seq: seq, Opcode: verbs.OpWrite,
			RKey: m.RKey(), RemoteAddr: addr, Length: 8, Payload: [][]byte{[]byte("pwned!!!")}}, &w)
		return w.last()
	}
	peer := n.NewSession(1, "test://peer")
	defer peer.Close()
	other := n.NewSession(2, "test://other")
	defer other.Close()

	if r := read(peer, 42, q.QPN(), 1); r.Kind != RespAck || r.Status != verbs.StatusSuccess || string(r.Data) != "victim!!" {
		t.Fatalf("connected peer's READ: %+v", r)
	}
	drops := []Response{
		read(other, 42, q.QPN(), 1), // another node, the right QP number
		read(peer, 43, q.QPN(), 2),  // the right node, another of its QPs
		read(other, 7, q.QPN(), 1),
		read(other, 42, q.QPN()^1, 2), // no such QP
		write(other, 42, 3, m.Addr()),
		write(other, 42, 4, verbs.ScratchBase),
		read(other, 42, q.QPN(), 5),
	}
	for i, r := range drops {
		if r.Kind != RespDrop || len(r.Data) != 0 {
			t.Errorf("wrong-peer request %d: %+v, want a drop", i, r)
		}
	}
	if string(m.Bytes()[:8]) != "victim!!" || q.resp.scratch[0] != 0 {
		t.Errorf("memory changed by dropped requests: %q, scratch %#x", m.Bytes()[:8], q.resp.scratch[0])
	}
	if got := n.Stats().WrongPeer; got != uint64(len(drops)) {
		t.Errorf("WrongPeer = %d, want %d", got, len(drops))
	}
	// Reconnected to another peer, the QP refuses the old one.
	must(t, q.Modify(verbs.QPAttr{State: verbs.StateReset}))
	must(t, verbs.ConnectRC(q, verbs.AccessAll, "test://other", 7))
	if r := read(peer, 42, q.QPN(), 6); r.Kind != RespDrop {
		t.Errorf("old peer after reconnection: %+v, want a drop", r)
	}
	if r := read(other, 7, q.QPN(), 1); r.Status != verbs.StatusSuccess {
		t.Errorf("new peer: %+v", r)
	}
}

// TestSessionStateBounded: a peer sending requests from ever new QP
// numbers leaves no state behind in its session (it used to keep one
// entry per number until the link closed).
func TestSessionStateBounded(t *testing.T) {
	n, q, m := isoNode(t, "test://peer", 42)
	s := n.NewSession(1, "test://peer")
	defer s.Close()
	var w recorder
	r := Request{DstQPN: q.QPN(), Epoch: 1, Opcode: verbs.OpRead, RKey: m.RKey(), RemoteAddr: m.Addr(), Length: 8}
	for i := uint32(0); i < 100000; i++ {
		r.SrcQPN, r.Seq = 1000+i, i
		s.Serve(&r, &w)
		w.reset()
	}
	r.SrcQPN, r.Seq = 42, 1
	s.Serve(&r, &w)
	if len(s.qps) > 1 {
		t.Errorf("session holds %d requester states after 100,000 bogus QP numbers, want ≤ 1", len(s.qps))
	}
	if n.Stats().WrongPeer != 100000 || w.last().Status != verbs.StatusSuccess {
		t.Errorf("WrongPeer = %d, legitimate READ %+v", n.Stats().WrongPeer, w.last())
	}
}

// TestLocalRequesterMustBeConnectedPeer: in-process requesters obey the
// same rule: a QP whose responder QP is connected to someone else gets
// RETRY_EXC_ERR and changes nothing.
func TestLocalRequesterMustBeConnectedPeer(t *testing.T) {
	n, q, m := isoNode(t, "test://responder", 42) // connected to a QP 42 of its own node
	pd, _ := n.AllocPD()
	cq, _ := n.CreateCQ(16)
	// A stub network cannot resolve the node itself: connect by hand.
	a, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	qa := a.(*QP)
	must(t, qa.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}))
	qa.mu.Lock()
	qa.setDest(n)
	qa.conn.destQPN = q.QPN()
	qa.conn.epoch++
	qa.mu.Unlock()
	qa.state.Store(uint32(verbs.StateRTS))
	lm, _ := pd.AllocMR(64, verbs.AccessAll)
	copy(lm.Bytes(), "pwned!!!")
	must(t, qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: lm.Addr(), Length: 8, LKey: lm.LKey()}}, RemoteAddr: m.Addr(), RKey: m.RKey()}}))
	wc := make([]verbs.WC, 1)
	if k, _ := cq.Poll(wc); k != 1 || wc[0].Status != verbs.StatusRetryExcErr {
		t.Fatalf("WRITE to another QP's responder: %d %+v, want RETRY_EXC_ERR", k, wc[0])
	}
	if string(m.Bytes()[:8]) != "victim!!" || n.Stats().WrongPeer != 1 {
		t.Errorf("memory %q, WrongPeer %d", m.Bytes()[:8], n.Stats().WrongPeer)
	}
}

// TestQPNumbersRandom: QP numbers are 24-bit, unique, never reserved, and
// not consecutive.
func TestQPNumbersRandom(t *testing.T) {
	n := NewNode(Config{Address: "test://n"})
	defer n.Close()
	pd, _ := n.AllocPD()
	cq, _ := n.CreateCQ(16)
	seen := map[uint32]bool{}
	low := map[uint32]bool{}
	var prev uint32
	consecutive := 0
	for i := 0; i < 300; i++ {
		q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
		must(t, err)
		qpn := q.QPN()
		if qpn <= 1 || qpn >= 0xffffff || seen[qpn] {
			t.Fatalf("QPN %#x: reserved, out of range or reused", qpn)
		}
		if qpn == prev+1 {
			consecutive++
		}
		seen[qpn], low[qpn%qpnSpread], prev = true, true, qpn
	}
	if consecutive > 2 {
		t.Errorf("%d of 300 QP numbers follow the previous one", consecutive)
	}
	if len(low) != 300 {
		t.Errorf("300 QPs share %d residues mod %d; tables indexed by them collide", len(low), qpnSpread)
	}
}

// TestSessionForgetsDepartedRequesters: past maxReqStates, a session
// drops the state of requesters whose responder QP is gone, so a
// long-lived link with churning QPs stays bounded too.
func TestSessionForgetsDepartedRequesters(t *testing.T) {
	n, _, m := isoNode(t, "test://peer", 1<<20)
	pd := m.pd // the region's
	cq, _ := n.CreateCQ(16)
	s := n.NewSession(1, "test://peer")
	defer s.Close()
	var w recorder
	connected := func(peerQPN uint32) verbs.QP {
		q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
		must(t, err)
		must(t, verbs.ConnectRC(q, verbs.AccessAll, "test://peer", peerQPN))
		return q
	}
	serve := func(q verbs.QP, src uint32) {
		w.reset()
		s.Serve(&Request{SrcQPN: src, DstQPN: q.QPN(), Epoch: 1, Seq: 1, Opcode: verbs.OpRead, RKey: m.RKey(), RemoteAddr: m.Addr(), Length: 8}, &w)
		if w.last().Status != verbs.StatusSuccess {
			t.Fatalf("READ from %d: %+v", src, w.last())
		}
	}
	for i := uint32(1); i <= maxReqStates; i++ {
		q := connected(i)
		serve(q, i)
		must(t, q.Destroy())
	}
	serve(connected(maxReqStates+1), maxReqStates+1)
	if len(s.qps) != 1 {
		t.Errorf("session holds %d requester states, want 1 (the others' QPs are gone)", len(s.qps))
	}
}
