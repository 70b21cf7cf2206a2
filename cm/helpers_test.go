package cm

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// node is one loop device with a PD, a CQ and a 4 KiB region.
type node struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	mr  verbs.MR
}

// fabric returns a loop fabric name unique to the test.
func fabric(t testing.TB) string {
	return "cm-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
}

func newNode(t testing.TB, name string) *node {
	t.Helper()
	dev, err := verbs.Open(loop.Scheme + "://" + fabric(t) + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(1024)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	return &node{dev: dev, pd: pd, cq: cq, mr: mr}
}

// opts returns Options for a QP of n allowing every remote access.
func (n *node) opts(pd []byte) Options {
	return Options{PD: n.pd, SendCQ: n.cq, RecvCQ: n.cq, Access: verbs.AccessAll, PrivateData: pd}
}

// bareOpts returns Options on a fresh PD without regions, so a test can
// prove the exchange destroyed its QP: the PD deallocates only then.
func (n *node) bareOpts(t testing.TB) Options {
	t.Helper()
	pd, err := n.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return Options{PD: pd, SendCQ: n.cq, RecvCQ: n.cq, Access: verbs.AccessAll}
}

// mustDealloc fails the test if the PD still has a QP.
func mustDealloc(t testing.TB, pd verbs.PD) {
	t.Helper()
	if err := pd.Dealloc(); err != nil {
		t.Fatalf("PD still in use (QP leaked?): %v", err)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func listen(t testing.TB, n *node) *Listener {
	t.Helper()
	l, err := Listen(ctxT(t, 5*time.Second), n.dev, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// acceptAsync answers the next request in the background.
func acceptAsync(t testing.TB, l *Listener, opts Options) <-chan result {
	ch := make(chan result, 1)
	go func() {
		c, err := l.AcceptConn(ctxT(t, 10*time.Second), opts)
		ch <- result{c, err}
	}()
	return ch
}

type result struct {
	c   *Conn
	err error
}

// waitWC polls one completion of cq.
func waitWC(t testing.TB, cq verbs.CQ) verbs.WC {
	t.Helper()
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctxT(t, 5*time.Second), cq, wc, verbs.PollAdaptive); err != nil {
		t.Fatal(err)
	}
	return wc[0]
}

// post posts one signaled work request on qp and checks its completion.
func post(t testing.TB, c *Conn, n *node, wr verbs.SendWR) {
	t.Helper()
	wr.Flags |= verbs.FlagSignaled
	if err := c.QP().PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, n.cq); wc.Status != verbs.StatusSuccess {
		t.Fatalf("%v: %v", wr.Opcode, wc.Status)
	}
}

// exercise runs READ, WRITE and SEND from a (over ca) to b (over cb),
// where bDesc describes b's region as a learned it.
func exercise(t *testing.T, a *node, ca *Conn, b *node, cb *Conn, bDesc MRDesc) {
	t.Helper()
	tag := fmt.Sprintf("from %s", a.dev.Address())

	// WRITE a → b.
	copy(a.mr.Bytes(), "write "+tag)
	n := uint32(len("write " + tag))
	post(t, ca, a, verbs.SendWR{Opcode: verbs.OpWrite,
		SGL:        []verbs.SGE{{Addr: a.mr.Addr(), Length: n, LKey: a.mr.LKey()}},
		RemoteAddr: bDesc.Addr + 1024, RKey: bDesc.RKey})
	if got := b.mr.Bytes()[1024 : 1024+n]; !bytes.Equal(got, a.mr.Bytes()[:n]) {
		t.Fatalf("WRITE landed %q", got)
	}

	// READ it back.
	post(t, ca, a, verbs.SendWR{Opcode: verbs.OpRead,
		SGL:        []verbs.SGE{{Addr: a.mr.Addr() + 2048, Length: n, LKey: a.mr.LKey()}},
		RemoteAddr: bDesc.Addr + 1024, RKey: bDesc.RKey})
	if got := a.mr.Bytes()[2048 : 2048+n]; !bytes.Equal(got, a.mr.Bytes()[:n]) {
		t.Fatalf("READ got %q", got)
	}

	// SEND a → b into a posted receive.
	if err := cb.QP().PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{{Addr: b.mr.Addr() + 3072, Length: 256, LKey: b.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	copy(a.mr.Bytes(), "send "+tag)
	n = uint32(len("send " + tag))
	post(t, ca, a, verbs.SendWR{Opcode: verbs.OpSend,
		SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: n, LKey: a.mr.LKey()}}})
	wc := waitWC(t, b.cq)
	if wc.Status != verbs.StatusSuccess || wc.ID != 9 || wc.ByteLen != n || wc.SrcQPN != ca.QP().QPN() {
		t.Fatalf("receive: %+v", wc)
	}
	if got := b.mr.Bytes()[3072 : 3072+n]; string(got) != "send "+tag {
		t.Fatalf("SEND delivered %q", got)
	}
}
