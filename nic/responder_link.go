package nic

import (
	"encoding/binary"

	"github.com/rdmakit/rdmakit/verbs"
)

// Session is the responder side of one link from another process: the
// soft NIC that executes the link's requests against this node's memory
// without the application. A transport creates one per incoming
// connection and calls Serve from a single goroutine, in arrival order.
type Session struct {
	node     *Node
	peerID   uint32
	addr     string               // the requester node's address (isolation.go)
	qps      map[uint32]*reqState // by requester QPN; only QPs a responder QP accepts
	sc       scratch
	resp     Response
	word     [32]byte
	wordList [1][]byte // part of word as a list: a request's sink
	req      request
	out      outcome
	mem      memory
	held     *MR // the region a READ response points into
	// last is the state of the requester QP lastQPN, the one that sent the
	// previous request (a cache in front of qps); cur is the state of the
	// request being served.
	last      *reqState
	lastQPN   uint32
	cur       *reqState
	failedCmp bool // the atomic just served did not swap
	stats     sessionStats
}

// reqState is what the responder remembers of one requester QP: its
// current connection and whether its requests are being discarded.
type reqState struct {
	prevOK bool // the last request served succeeded (chain.go)
	epoch  uint32
	mode   uint8
	wait   uint32 // the sequence number to resume at, in modeWait
	dq     *QP    // the responder QP it used last (a cache)
}

const (
	modeNormal = iota
	modeWait   // an RNR was answered: discard until the retry of seq wait
	modeDead   // an error was answered: discard everything of this epoch
)

// NewSession creates the responder for a link from the node at address
// (as the link announced it), which this node knows as peerID (it becomes
// WC.SrcID of the receives it causes). Only requests that come from the
// connected peer of the RC QP they name are served (isolation.go). Close
// it when the link ends.
func (n *Node) NewSession(peerID uint32, address string) *Session {
	s := &Session{node: n, peerID: peerID, addr: address, qps: map[uint32]*reqState{}}
	n.sessMu.Lock()
	n.sessions[s] = struct{}{}
	n.sessMu.Unlock()
	return s
}

// Serve executes one request and answers it through w, unless it is a
// datagram (no answer) or a request the responder discards (a later one
// of a QP waiting for an RNR retry, or after an error). A request that
// does not come from the connected peer of the QP it names is dropped:
// w gets a RespDrop, which must not reach the requester (isolation.go).
func (s *Session) Serve(r *Request, w Responder) {
	src := source{qpn: r.SrcQPN, id: s.peerID}
	if r.Datagram {
		if r.Opcode == verbs.OpSend || r.Opcode == verbs.OpSendWithImm {
			s.req = request{op: r.Opcode, flags: r.Flags, imm: r.Imm, src: src, payload: r.Payload, length: uint64(r.Length)}
			deliverUD(s.node, &s.sc, &s.req, r.DstQPN, r.QKey)
			s.req.payload = nil
			s.stats.count(r.Opcode, r.Length, verbs.StatusSuccess, false)
		}
		return
	}
	st, dq := s.admit(r)
	if dq == nil {
		// Not from the QP's connected peer: dropped, as an RC NIC drops a
		// packet from the wrong source. The transport is told so that it
		// can retire the request from its own bookkeeping (shm); nothing
		// reaches the requester.
		s.node.wrongPeer()
		s.resp = Response{Kind: RespDrop, SrcQPN: r.SrcQPN, Epoch: r.Epoch, Seq: r.Seq}
		w.Respond(&s.resp)
		return
	}
	if r.Epoch != st.epoch {
		if r.Epoch < st.epoch && st.epoch-r.Epoch < 1<<31 {
			return // a request of an older connection of the QP
		}
		*st = reqState{epoch: r.Epoch, prevOK: true}
	}
	s.cur = st
	st.dq = dq
	switch st.mode {
	case modeDead:
		return
	case modeWait:
		if r.Seq != st.wait {
			return
		}
		st.mode = modeNormal
	}
	resp := &s.resp
	*resp = Response{SrcQPN: r.SrcQPN, Epoch: r.Epoch, Seq: r.Seq}
	var status verbs.Status
	var rnr bool
	if r.Flags&verbs.FlagConditional != 0 && !st.prevOK {
		status = verbs.StatusSkipped
	} else {
		s.failedCmp = false
		status, rnr = s.execute(r, dq, src, resp)
	}
	if !rnr {
		st.prevOK = status == verbs.StatusSuccess && !s.failedCmp
	}
	if rnr {
		st.mode, st.wait = modeWait, r.Seq
		resp.Kind = RespRNR
	} else if status != verbs.StatusSuccess && status != verbs.StatusSkipped {
		st.mode = modeDead
	}
	resp.Status = status
	s.stats.count(r.Opcode, r.Length, status, rnr)
	w.Respond(resp)
	if s.held != nil {
		s.held.release()
		s.held = nil
	}
	resp.Data = nil
}

// execute runs an admitted request through the responder; READ bytes and
// atomic values go into the response.
func (s *Session) execute(r *Request, dq *QP, src source, resp *Response) (verbs.Status, bool) {
	s.node.charge()
	if !receiving(dq) {
		return verbs.StatusRetryExcErr, false
	}
	q := &s.req
	*q = request{
		op: r.Opcode, flags: r.Flags, rkey: r.RKey, addr: r.RemoteAddr, length: uint64(r.Length), imm: r.Imm,
		arg: r.ArgAddr, redirect: r.RedirectAddr, atomic: &r.Atomic, src: src, payload: r.Payload,
	}
	if r.Opcode.IsAtomic() {
		q.sink = s.sink(min(atomicSize(r.Opcode, &r.Atomic), uint64(len(s.word))))
	} else if r.Opcode == verbs.OpRead && r.Length == 8 {
		// Copied now rather than pointed at: the word-copy rule (sgl.go)
		// holds for it.
		q.sink = s.sink(8)
	}
	o := &s.out
	s.mem.dq, s.mem.sc, s.mem.lk = dq, &s.sc, dq.node.locks
	s.mem.respond(q, o)
	q.payload, q.sink, q.atomic = nil, nil, nil
	s.failedCmp = o.failedCmp
	switch {
	case o.st != verbs.StatusSuccess, r.Flags&verbs.FlagRedirect != 0 && r.Opcode == verbs.OpRead:
		// Nothing to return: a REDIRECT READ left its bytes at the responder.
	case o.held != nil || o.data != nil:
		s.held = o.held // until Respond has copied the bytes
		resp.Data = o.data
		o.held, o.data = nil, nil
	case r.Opcode == verbs.OpAllocate:
		if r.Flags&verbs.FlagRedirect == 0 {
			binary.NativeEndian.PutUint64(s.word[:8], o.result)
			resp.Data = s.word[:8]
		}
	case r.Opcode.IsAtomic() || r.Opcode == verbs.OpRead:
		resp.Data = s.word[:o.n]
	}
	return o.st, o.rnr
}

// sink is the session's word buffer, n bytes, as a one-entry list.
func (s *Session) sink(n uint64) [][]byte {
	s.wordList[0] = s.word[:n]
	return s.wordList[:]
}

// maxReqStates bounds a session's requester states before it forgets
// those no responder QP accepts any more (QPs destroyed or reconnected).
const maxReqStates = 1024

// admit finds the responder QP a request names and checks that the
// request comes from its connected peer: this session's node and the QP
// number the responder QP was connected to. It returns the requester's
// state, created on its first admitted request, and the responder QP, or
// a nil QP when the request must be dropped. A session thus holds state
// only for requester QPs that some QP of this node is connected to.
func (s *Session) admit(r *Request) (*reqState, *QP) {
	st := s.last
	if st == nil || s.lastQPN != r.SrcQPN {
		st = s.qps[r.SrcQPN]
	}
	var dq *QP
	if st != nil {
		dq = st.dq
	}
	if dq == nil || dq.qpn != r.DstQPN || dq.state.Load() == stateDestroyed {
		dq = s.node.qp(r.DstQPN)
	}
	if dq == nil || dq.typ != verbs.RC || !dq.accepts(s.addr, r.SrcQPN) {
		return nil, nil
	}
	if st == nil {
		if len(s.qps) >= maxReqStates {
			s.forget()
		}
		st = &reqState{epoch: r.Epoch, prevOK: true}
		s.qps[r.SrcQPN] = st
	}
	s.last, s.lastQPN = st, r.SrcQPN
	return st, dq
}

// forget drops the state of requester QPs that their responder QP no
// longer accepts.
func (s *Session) forget() {
	for qpn, st := range s.qps {
		if st.dq == nil || !st.dq.accepts(s.addr, qpn) {
			delete(s.qps, qpn)
		}
	}
	s.last, s.lastQPN = nil, 0
}
