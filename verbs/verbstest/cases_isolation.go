package verbstest

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// isolationCases: an RC QP serves only the QP it was connected to.
func isolationCases() []Case {
	return []Case{
		parallel("WrongPeerRefused", wrongPeerRefused),
	}
}

// wrongPeerRefused: qb on b is connected to qa on a. QPs that name qb
// without being its peer — one on a third node, one on a itself — are
// refused whatever they ask: READ, WRITE (region and scratch area), an
// atomic and SEND complete with RETRY_EXC_ERR, as a request the responder
// drops does, and nothing at b changes; the legitimate pair still works.
func wrongPeerRefused(t *testing.T, p Provider) {
	pr := newPair(t, p, pairOpts{nodes: 3})
	c := pr.nodes[2]
	fill(pr.mb.Bytes()[:64], 0xb0)
	before := append([]byte(nil), pr.mb.Bytes()[:64]...)
	// qb's receive, for a SEND: no intruder may consume it.
	postRecv(t, pr.qb, 100, sg(pr.mb, 256, 64))
	// qa writes its scratch area at b, which intruders then try to read
	// and overwrite.
	lm := pr.a.mr(t, 64, verbs.AccessAll)
	fill(lm.Bytes(), 0x5c)
	expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, scratchWR(1, verbs.OpWrite, sg(lm, 0, 8)))

	for _, from := range []*node{c, pr.a} {
		m := from.mr(t, 64, verbs.AccessAll)
		fill(m.Bytes(), 0xee)
		wrs := []verbs.SendWR{
			rdma(2, verbs.OpRead, pr.mb, 0, sg(m, 0, 8)),
			rdma(3, verbs.OpWrite, pr.mb, 0, sg(m, 0, 8)),
			scratchWR(4, verbs.OpRead, sg(m, 0, 8)),
			scratchWR(5, verbs.OpWrite, sg(m, 0, 8)),
			faa(6, pr.mb, 8, sg(m, 8, 8), 1),
			send(7, sg(m, 0, 8)),
		}
		for _, wr := range wrs {
			// A fresh QP per request: the first error moves a QP to ERROR.
			// A short retry budget: a dropped request times out.
			q := from.qp(t, qpOpts{})
			connect(t, q, pr.b.dev, pr.qb.QPN(), connOpts{access: verbs.AccessAll, timeout: 5 * time.Millisecond, retryCount: 1})
			wr.Flags |= verbs.FlagSignaled
			expect(t, q, from.cq, verbs.StatusRetryExcErr, wr)
		}
	}
	equal(t, "b's region after the intruders", pr.mb.Bytes()[:64], before)

	// The pair is unharmed: its scratch area, region and receive are as
	// it left them.
	expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, scratchWR(10, verbs.OpRead, sg(lm, 16, 8)))
	equal(t, "qa's scratch area", lm.Bytes()[16:24], lm.Bytes()[0:8])
	copy(pr.ma.Bytes(), "from qa!")
	expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(11, sg(pr.ma, 0, 8)))
	if wc := wait1(t, pr.b.cq); wc.ID != 100 || wc.Status != verbs.StatusSuccess || string(pr.mb.Bytes()[256:264]) != "from qa!" {
		t.Fatalf("qb's receive: %+v, %q; want qa's SEND", wc, pr.mb.Bytes()[256:264])
	}
}

// scratchWR builds a signaled READ or WRITE of the peer QP's scratch
// area, which needs no rkey.
func scratchWR(id uint64, op verbs.Opcode, sgl ...verbs.SGE) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: op, Flags: verbs.FlagSignaled, SGL: sgl, RemoteAddr: verbs.ScratchAddr(0)}
}
