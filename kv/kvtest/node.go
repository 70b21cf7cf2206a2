package kvtest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// A store node of a test's own configuration served on memnode over tcp,
// so that clients in other processes (the kill tests' writers) reach it
// as they reach `rdmakit kv serve`.

// ServedNode is what ServeNode serves: a store's node (pilaf, prismkv and
// race servers).
type ServedNode interface {
	Node
	Close() error
}

// ServeNode starts memnode over tcp with one service named design whose
// node mk makes, and returns memnode's CM address and the node. The
// test's cleanup stops it.
func ServeNode[S ServedNode](t testing.TB, design string, mk func(pd verbs.PD) (S, error)) (string, S) {
	t.Helper()
	var node S
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0", Probe: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		NewService: func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
			n, err := mk(pd)
			if err != nil {
				return nil, err
			}
			node = n
			return &service{name: design, node: n, dev: dev}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Info().CM, node
}

// service is a node as a memnode.Service.
type service struct {
	name string
	node ServedNode
	dev  verbs.Device
}

func (s *service) Name() string           { return s.name }
func (s *service) Admit(string) error     { return nil }
func (s *service) Describe(*memnode.Info) {}
func (s *service) Close() error           { return s.node.Close() }
func (s *service) Open() (memnode.Session, error) {
	cq, err := s.dev.CreateCQ(4096)
	if err != nil {
		return nil, err
	}
	return &session{node: s.node, cq: cq}, nil
}

// session is one client of the node.
type session struct {
	node ServedNode
	cq   verbs.CQ
	conn *rpc.ServerConn
}

func (s *session) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: stores.QPCap, Access: verbs.AccessAll}
}

func (s *session) Prepare(qp verbs.QP) (err error) {
	s.conn, err = s.node.Attach(qp)
	return err
}

func (s *session) Serve(ctx context.Context, _ verbs.QP, cq verbs.CQ) error {
	return s.conn.Serve(ctx, cq)
}

func (s *session) Close() error {
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(err, s.cq.Destroy())
}

// Remote is a client on its own tcp device, connected to a node that
// ServeNode serves.
type Remote[C kv.Store] struct {
	Store C
	dev   verbs.Device
	conn  *cm.Conn
}

// DialNode connects a client of design (ServeNode's name), made by
// newClient on the connection, to the node at addr.
func DialNode[C kv.Store](ctx context.Context, addr, design string,
	newClient func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (C, error)) (*Remote[C], error) {
	dev, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	cq, err := dev.CreateCQ(4096)
	if err != nil {
		dev.Close()
		return nil, err
	}
	conn, err := cm.Dial(ctx, dev, addr, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap, Access: verbs.AccessAll,
		MinRNRTimer: stores.ClientMinRNR, RNRRetry: stores.ClientRNRRetry, PrivateData: memnode.Hello{Service: design}.Marshal()})
	if err != nil {
		dev.Close()
		return nil, err
	}
	c, err := newClient(ctx, pd, conn.QP(), cq)
	if err != nil {
		conn.Close()
		dev.Close()
		return nil, err
	}
	return &Remote[C]{Store: c, dev: dev, conn: conn}, nil
}

// Get implements kv.Store.
func (r *Remote[C]) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	return r.Store.Get(ctx, key, dst)
}

// Put implements kv.Store.
func (r *Remote[C]) Put(ctx context.Context, key, value []byte) error {
	return r.Store.Put(ctx, key, value)
}

// Delete implements kv.Store.
func (r *Remote[C]) Delete(ctx context.Context, key []byte) error { return r.Store.Delete(ctx, key) }

// Close closes the client, its connection and its device.
func (r *Remote[C]) Close() error {
	err := r.Store.Close()
	r.conn.Close()
	r.dev.Close()
	return err
}
