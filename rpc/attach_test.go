package rpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// replayCQ returns wc before what its CQ holds.
type replayCQ struct {
	verbs.CQ
	wc []verbs.WC
}

func (r *replayCQ) Poll(wc []verbs.WC) (int, error) {
	if len(r.wc) == 0 {
		return r.CQ.Poll(wc)
	}
	n := copy(wc, r.wc)
	r.wc = r.wc[n:]
	return n, nil
}

// TestAttachPostsReceives attaches a connection whose QP is in INIT,
// connects it to a client that never retries RNR, and starts serving
// only once the client's first request has arrived: the request found a
// receive Attach posted, and the call succeeds.
func TestAttachPostsReceives(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			open := func(name string) *conn {
				uri := fmt.Sprintf("loop://rpc-attach-%s/%s", scheme, name)
				if scheme == "tcp" {
					uri = "tcp://127.0.0.1:0"
				}
				d, err := verbs.Open(uri)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				pd, _ := d.AllocPD()
				cq, _ := d.CreateCQ(1024)
				qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256}})
				if err != nil {
					t.Fatal(err)
				}
				return &conn{d, pd, cq, qp}
			}
			cl, sv := open("client"), open("server")
			if err := sv.qp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
				t.Fatal(err)
			}
			srv := newServer()
			sc, err := srv.Attach(sv.pd, sv.qp)
			if err != nil {
				t.Fatal(err)
			}
			if err := verbs.ConnectRC(sv.qp, verbs.AccessAll, cl.dev.Address(), cl.qp.QPN()); err != nil {
				t.Fatal(err)
			}
			if err := cl.qp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
				t.Fatal(err)
			}
			if err := cl.qp.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: sv.dev.Address(), DestQPN: sv.qp.QPN()}); err != nil {
				t.Fatal(err)
			}
			if err := cl.qp.Modify(verbs.QPAttr{State: verbs.StateRTS, RNRRetry: verbs.NoRNRRetry}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() {
				wc := make([]verbs.WC, 16)
				n, err := verbs.PollWait(ctx, sv.cq, wc, verbs.PollAdaptive)
				if err != nil {
					sc.Close()
					served <- nil
					return
				}
				served <- sc.Serve(ctx, &replayCQ{CQ: sv.cq, wc: wc[:n]})
			}()
			defer func() {
				cancel()
				if err := <-served; err != nil {
					t.Errorf("Serve: %v", err)
				}
			}()
			c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, rpc.ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req, resp := make([]byte, 16), make([]byte, 8)
			binary.LittleEndian.PutUint64(req, 40)
			binary.LittleEndian.PutUint64(req[8:], 2)
			if _, err := c.Call(ctx, methodAdd, req, resp); err != nil {
				t.Fatalf("first call: %v", err)
			}
			if got := binary.LittleEndian.Uint64(resp); got != 42 {
				t.Errorf("40+2 = %d", got)
			}
		})
	}
}

// TestServerConnClose: a connection closed unserved cannot be served,
// and Close is idempotent.
func TestServerConnClose(t *testing.T) {
	_, sv := pair(t, "loop")
	sc, err := newServer().Attach(sv.pd, sv.qp)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := sc.Serve(context.Background(), sv.cq); !errors.Is(err, rpc.ErrClosed) {
		t.Errorf("Serve after Close: %v, want ErrClosed", err)
	}
}

// TestAttachResetQP: a QP in RESET takes no receives; Attach fails.
func TestAttachResetQP(t *testing.T) {
	d, err := verbs.Open("loop://rpc-attach-reset/n")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pd, _ := d.AllocPD()
	cq, _ := d.CreateCQ(64)
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 128}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newServer().Attach(pd, qp); err == nil {
		t.Fatal("Attach on a RESET QP succeeded")
	}
}
