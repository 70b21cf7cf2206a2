package nic

// Tenant isolation. An RC QP serves, as a responder, only the requester it
// was connected to at RTR: the QP number given as DestQPN on the node
// whose address was given as Dest. A request naming the QP from anywhere
// else — another QP of the same peer, a QP of another peer, a QP number
// that does not exist — is dropped without an answer, as an RC NIC drops
// a packet from the wrong source (the requester times out with
// RETRY_EXC_ERR), and counted in Stats.WrongPeer. Every path that finds a
// responder QP applies the rule: a requester in this process
// (requester_local.go), a Session serving a link (responder_link.go), and
// the shm transport's direct path, through the QP's published peer
// (ConnectedPeer). The other way
// round, a response is taken only from the link the QP's requests go to
// (HandleResponse): a node cannot complete requests sent to another.

// connPeer is the requester an RC QP is connected to.
type connPeer struct {
	addr string // the requester's node address (Target.Address)
	qpn  uint32
}

// accepts reports whether the RC QP dq serves requests of the requester
// QP qpn on the node at addr. It allocates nothing: a hot-path check.
func (dq *QP) accepts(addr string, qpn uint32) bool {
	p := dq.resp.peer.Load()
	return p != nil && p.qpn == qpn && p.addr == addr
}

// ConnectedPeer returns the address of the node and the number of the QP
// that this RC QP was connected to at RTR, the only requester it serves;
// ok is false when it is not connected (RESET, INIT, destroyed, or UD).
func (q *QP) ConnectedPeer() (address string, qpn uint32, ok bool) {
	p := q.resp.peer.Load()
	if p == nil {
		return "", 0, false
	}
	return p.addr, p.qpn, true
}

// wrongPeer counts a request dropped because it did not come from its
// responder QP's connected peer.
func (n *Node) wrongPeer() { n.dropped.Add(1) }
