package cm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// prepareRecv returns an Options.Prepare that checks the QP is in INIT
// and posts one receive into n's region.
func prepareRecv(t *testing.T, n *node) func(verbs.QP) error {
	return func(qp verbs.QP) error {
		if s := qp.State(); s != verbs.StateInit {
			t.Errorf("Prepare: QP in %v, want INIT", s)
		}
		return qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: n.mr.Addr(), Length: 64, LKey: n.mr.LKey()}}}})
	}
}

// TestPrepare: each side's Prepare posts a receive on its QP during the
// exchange, and neither side retries RNR: a SEND each side posts as soon
// as its call returns finds the receive there.
func TestPrepare(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	so, co := srv.opts(nil), cli.opts(nil)
	so.RNRRetry, co.RNRRetry = verbs.NoRNRRetry, verbs.NoRNRRetry
	so.Prepare, co.Prepare = prepareRecv(t, srv), prepareRecv(t, cli)
	ch := acceptAsync(t, l, so)
	cc, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), co)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	post(t, cc, cli, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, SGL: []verbs.SGE{{Addr: cli.mr.Addr() + 1024, Length: 8, LKey: cli.mr.LKey()}}})
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if wc := waitWC(t, srv.cq); wc.Opcode != verbs.WCRecv || wc.Status != verbs.StatusSuccess || wc.ID != 7 {
		t.Fatalf("server's receive: %+v", wc)
	}
	post(t, r.c, srv, verbs.SendWR{ID: 2, Opcode: verbs.OpSend, SGL: []verbs.SGE{{Addr: srv.mr.Addr() + 1024, Length: 8, LKey: srv.mr.LKey()}}})
	if wc := waitWC(t, cli.cq); wc.Opcode != verbs.WCRecv || wc.Status != verbs.StatusSuccess || wc.ID != 7 {
		t.Fatalf("client's receive: %+v", wc)
	}
}

// TestPrepareFails: a failing Prepare fails the exchange on its side,
// tells the other, and destroys the QP.
func TestPrepareFails(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	boom := errors.New("no buffers")
	fail := func(verbs.QP) error { return boom }

	// The listener's Prepare fails: the dialer is rejected.
	so := srv.bareOpts(t)
	so.Prepare = fail
	ch := acceptAsync(t, l, so)
	_, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(nil))
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "no buffers") {
		t.Errorf("Dial: %v, want rejected with the reason", err)
	}
	if r := <-ch; !errors.Is(r.err, boom) {
		t.Errorf("Accept: %v, want Prepare's error", r.err)
	}
	mustDealloc(t, so.PD)

	// The dialer's Prepare fails: Dial returns its error before sending a
	// request.
	co := cli.bareOpts(t)
	co.Prepare = fail
	if _, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), co); !errors.Is(err, boom) {
		t.Errorf("Dial: %v, want Prepare's error", err)
	}
	mustDealloc(t, co.PD)
}
