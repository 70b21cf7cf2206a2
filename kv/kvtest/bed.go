package kvtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/prismkv"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// Bed is a node device and a client device on one transport, for tests:
// "loop" (the devices are nodes "node" and "client" of the loop fabric
// named Fabric), "shm" (two shared-memory devices of this process) or
// "tcp".
type Bed struct {
	Fabric string
	Node   verbs.Device // the store's node
	NodePD verbs.PD
	Dev    verbs.Device // the clients'
	PD     verbs.PD
	// Late serves each connection only once its first request has
	// arrived (see Late): for tests that the node's receives are posted
	// when the client connects.
	Late    bool
	ctx     context.Context
	cancel  context.CancelFunc
	serving sync.WaitGroup
}

var beds atomic.Int64

// NewBed opens the two devices; the test's cleanup stops the serving
// goroutines, then closes them.
func NewBed(t testing.TB, scheme string) *Bed {
	t.Helper()
	b := &Bed{Fabric: fmt.Sprintf("kvtest-%d", beds.Add(1))}
	open := func(name string) (verbs.Device, verbs.PD) {
		uri := "loop://" + b.Fabric + "/" + name
		switch scheme {
		case "tcp":
			uri = "tcp://127.0.0.1:0"
		case "shm":
			uri = fmt.Sprintf("shm://%s-%d-%s", b.Fabric, os.Getpid(), name)
		}
		d, err := verbs.Open(uri)
		if err != nil {
			t.Fatal(err)
		}
		pd, err := d.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		return d, pd
	}
	b.Node, b.NodePD = open("node")
	b.Dev, b.PD = open("client")
	b.ctx, b.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() {
		b.cancel()
		b.serving.Wait()
		b.Dev.Close()
		b.Node.Close()
	})
	return b
}

// Node is a store's node side: Attach posts a connection's receives
// (pilaf, prismkv and race servers, stores.Server).
type Node interface {
	Attach(qp verbs.QP) (*rpc.ServerConn, error)
}

// Connect makes one RC connection from the client device to node: the
// node's receives are posted before the client's QP is connected (so its
// first request never meets a receiver-not-ready), the node's end is
// served until the test ends, and the client's QP and CQ are returned,
// sized for sendWRs and recvWRs.
func (b *Bed) Connect(t testing.TB, sendWRs, recvWRs int, node Node) (verbs.QP, verbs.CQ) {
	t.Helper()
	mk := func(d verbs.Device, pd verbs.PD) (verbs.QP, verbs.CQ) {
		cq, err := d.CreateCQ(4 * (sendWRs + recvWRs))
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: sendWRs, MaxRecvWR: recvWRs, MaxInlineData: verbs.DefaultMaxInlineData}})
		if err != nil {
			t.Fatal(err)
		}
		return qp, cq
	}
	cqp, ccq := mk(b.Dev, b.PD)
	sqp, scq := mk(b.Node, b.NodePD)
	if err := sqp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
		t.Fatal(err)
	}
	conn, err := node.Attach(sqp)
	if err != nil {
		t.Fatal(err)
	}
	if err := connectNode(sqp, b.Dev.Address(), cqp.QPN()); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	if err := stores.ConnectClient(cqp, b.Node.Address(), sqp.QPN()); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	b.serving.Add(1)
	go func() {
		defer b.serving.Done()
		cq := verbs.CQ(scq)
		if b.Late {
			var err error
			if cq, err = Late(b.ctx, scq); err != nil {
				conn.Close()
				return
			}
		}
		if err := conn.Serve(b.ctx, cq); err != nil && b.ctx.Err() == nil {
			t.Errorf("serving a connection: %v", err)
		}
	}()
	return cqp, ccq
}

// Clients makes n clients of a store on the bed, one connection each
// (sized for sendWRs and recvWRs requests, the node's end served by
// node), with dial turning a connection into a client. The test's
// cleanup closes them.
func Clients[C kv.Store](t testing.TB, b *Bed, n, sendWRs, recvWRs int, node Node,
	dial func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (C, error)) []C {
	t.Helper()
	var cs []C
	for i := 0; i < n; i++ {
		qp, cq := b.Connect(t, sendWRs, recvWRs, node)
		c, err := dial(context.Background(), b.PD, qp, cq)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// Runtime starts a smart runtime of workers on the client device, each
// worker's QP connected to a QP of the node device (Smart-HT's one-sided
// lists run there: stores.ClientOptions.Runtime). The test's cleanup
// closes it, before the bed closes the devices.
func (b *Bed) Runtime(t testing.TB, workers int) *smart.Runtime {
	t.Helper()
	ncq, err := b.Node.CreateCQ(1024)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := stores.NewRuntime(context.Background(), b.Dev, b.PD, b.RuntimeConnect(ncq), workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// RuntimeConnect is a smart runtime's ConnectFunc for this bed: each
// worker's QP on the client device, connected to a new QP of the node
// device whose completions go to ncq.
func (b *Bed) RuntimeConnect(ncq verbs.CQ) smart.ConnectFunc {
	return func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
		qp, err := b.PD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 512}})
		if err != nil {
			return nil, err
		}
		nqp, err := b.NodePD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ncq, RecvCQ: ncq})
		if err != nil {
			return nil, err
		}
		if err := verbs.ConnectRC(nqp, verbs.AccessAll, b.Dev.Address(), qp.QPN()); err != nil {
			return nil, err
		}
		return qp, verbs.ConnectRC(qp, verbs.AccessAll, b.Node.Address(), nqp.QPN())
	}
}

// connectNode connects the node's end of a connection (in INIT) as kv
// serve does: the store clients' retry timeout for its RPC answers.
func connectNode(qp verbs.QP, dest string, destQPN uint32) error {
	if err := qp.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: dest, DestQPN: destQPN}); err != nil {
		return err
	}
	return qp.Modify(verbs.QPAttr{State: verbs.StateRTS, Timeout: stores.ClientTimeout})
}

// SlotConnect is stores.ClientOptions.SlotConnect for this bed: each slot
// a SingleThreaded QP and CQ on the client device, connected to a new QP
// of the node device (completions to one CQ of the node's, made here). A
// slot carries one-sided lists and PRISM chains only: the node's end
// needs no serving.
func (b *Bed) SlotConnect(t testing.TB) func(context.Context) (prismkv.SlotConn, error) {
	t.Helper()
	ncq, err := b.Node.CreateCQ(1024)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (prismkv.SlotConn, error) {
		cq, err := verbs.CreateCQEx(b.Dev, verbs.CQInitAttr{Depth: 256, SingleThreaded: true})
		if err != nil {
			return prismkv.SlotConn{}, err
		}
		qp, err := b.PD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, SingleThreaded: true,
			Cap: verbs.QPCap{MaxSendWR: 160, MaxRecvWR: 1, MaxInlineData: verbs.DefaultMaxInlineData}})
		if err != nil {
			cq.Destroy()
			return prismkv.SlotConn{}, err
		}
		sc := prismkv.SlotConn{QP: qp, CQ: cq, Close: func() {
			qp.Destroy()
			cq.Destroy()
		}}
		nqp, err := b.NodePD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ncq, RecvCQ: ncq})
		if err == nil {
			if err = nqp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err == nil {
				if err = connectNode(nqp, b.Dev.Address(), qp.QPN()); err == nil {
					err = stores.ConnectClient(qp, b.Node.Address(), nqp.QPN())
				}
			}
		}
		if err != nil {
			sc.Close()
			return prismkv.SlotConn{}, err
		}
		return sc, nil
	}
}
