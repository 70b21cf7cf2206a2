package nic

import (
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// MaxOpcode bounds the opcodes counted in Stats.Ops.
const MaxOpcode = 64

// Stats are a node's counters: the requests its soft NIC served for peers
// in other processes, and the state of its own QPs.
type Stats struct {
	// Ops counts served requests by opcode (index: verbs.Opcode).
	Ops [MaxOpcode]uint64
	// Bytes counts payload bytes served: written, read and delivered.
	Bytes uint64
	// Errors counts requests answered with an error status.
	Errors uint64
	// RNR counts requests answered "receiver not ready".
	RNR uint64
	// WrongPeer counts RC requests dropped unanswered because they did not
	// come from the connected peer of the QP they named (or named no QP):
	// another tenant's requests, by any path (docs/verbs.md).
	WrongPeer uint64
	// Peers is the number of connected peer sessions now.
	Peers int
	// ConnectedQPs is the number of the node's QPs in RTR or RTS.
	ConnectedQPs int
	// Outstanding is the number of send requests posted on the node's QPs
	// and not yet completed.
	Outstanding int
}

// sessionStats are one session's counters, written by its serving
// goroutine and read by Stats.
type sessionStats struct {
	ops    [MaxOpcode]atomic.Uint64
	bytes  atomic.Uint64
	errors atomic.Uint64
	rnr    atomic.Uint64
}

func (s *sessionStats) count(op verbs.Opcode, n uint32, st verbs.Status, rnr bool) {
	if int(op) < MaxOpcode {
		s.ops[op].Add(1)
	}
	switch {
	case rnr:
		s.rnr.Add(1)
	case st != verbs.StatusSuccess:
		s.errors.Add(1)
	default:
		s.bytes.Add(uint64(n))
	}
}

func (s *sessionStats) addTo(t *Stats) {
	for i := range s.ops {
		t.Ops[i] += s.ops[i].Load()
	}
	t.Bytes += s.bytes.Load()
	t.Errors += s.errors.Load()
	t.RNR += s.rnr.Load()
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	n.sessMu.Lock()
	t := n.retired
	t.Peers = len(n.sessions)
	for s := range n.sessions {
		s.stats.addTo(&t)
	}
	n.sessMu.Unlock()
	t.WrongPeer = n.dropped.Load()
	for _, q := range *n.qps.Load() {
		if receiving(q) {
			t.ConnectedQPs++
		}
		q.mu.Lock()
		t.Outstanding += q.send.sq.len()
		q.mu.Unlock()
	}
	return t
}

// Close ends a session: its counters join the node's totals.
func (s *Session) Close() {
	n := s.node
	n.sessMu.Lock()
	defer n.sessMu.Unlock()
	if _, ok := n.sessions[s]; ok {
		delete(n.sessions, s)
		s.stats.addTo(&n.retired)
	}
}
