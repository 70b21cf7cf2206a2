package nic

// QP numbers are 24 bits, drawn at random (crypto/rand) so that one QP's
// number tells nothing about another's: a requester must be the connected
// peer of a responder QP (isolation.go), and an attacker who cannot guess
// the numbers cannot even aim at one. 0, 1 (ibverbs' special QPs) and
// 0xffffff (multicast) are never used.
//
// Among the free numbers, one whose value mod qpnSpread no live QP shares
// is preferred, so that a table indexed by QPN mod qpnSpread (the shm
// transport's QP table) stays free of collisions while the node has fewer
// than qpnSpread QPs. Lookups stay one map access.

// qpnSpread is the size of the QP tables indexed by QPN modulo it; it
// equals transport/shm's QPSlots.
const qpnSpread = 4096

// qpnTries bounds the draws spent looking for an unshared residue before
// any free number is taken.
const qpnTries = 64

// newQPN returns an unused random QP number; m holds the live QPs and
// n.mu is held.
func (n *Node) newQPN(m map[uint32]*QP) uint32 {
	for i := 0; ; i++ {
		qpn := random32() & 0xffffff
		if qpn <= 1 || qpn == 0xffffff {
			continue
		}
		if _, used := m[qpn]; used {
			continue
		}
		if i < qpnTries && n.qpLow[qpn%qpnSpread] != 0 {
			continue
		}
		return qpn
	}
}
