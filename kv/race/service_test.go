package race_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// A RACE node of a chosen depth served on memnode (stores.Service sizes
// its own), so that clients in other processes can connect to it.

// service is a race.Server as a memnode.Service.
type service struct {
	srv *race.Server
	dev verbs.Device
}

func (s *service) Name() string           { return "race" }
func (s *service) Admit(string) error     { return nil }
func (s *service) Describe(*memnode.Info) {}
func (s *service) Close() error           { return s.srv.Close() }
func (s *service) Open() (memnode.Session, error) {
	cq, err := s.dev.CreateCQ(4096)
	if err != nil {
		return nil, err
	}
	return &session{srv: s.srv, cq: cq}, nil
}

// session is one client of the node.
type session struct {
	srv  *race.Server
	cq   verbs.CQ
	conn *rpc.ServerConn
}

func (s *session) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: stores.QPCap, Access: verbs.AccessAll}
}

func (s *session) Prepare(qp verbs.QP) (err error) {
	s.conn, err = s.srv.Attach(qp)
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

// serveNode starts a RACE node of cfg on memnode over tcp; the test's
// cleanup stops it.
func serveNode(t *testing.T, cfg race.Config) (*memnode.Server, *race.Server) {
	t.Helper()
	var node *race.Server
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0", Probe: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		NewService: func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
			rs, err := race.NewServer(pd, cfg)
			if err != nil {
				return nil, err
			}
			node = rs
			return &service{srv: rs, dev: dev}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, node
}

// remoteClient is a client on its own tcp device, connected to the node
// at addr (memnode's CM address).
type remoteClient struct {
	*race.Client
	dev  verbs.Device
	conn *cm.Conn
}

// dialNode connects a client of cfg to the node at addr.
func dialNode(ctx context.Context, addr string, cfg race.ClientConfig) (*remoteClient, error) {
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
		MinRNRTimer: stores.ClientMinRNR, RNRRetry: stores.ClientRNRRetry, PrivateData: memnode.Hello{Service: "race"}.Marshal()})
	if err != nil {
		dev.Close()
		return nil, err
	}
	c, err := race.NewClient(ctx, pd, conn.QP(), cq, cfg)
	if err != nil {
		conn.Close()
		dev.Close()
		return nil, err
	}
	return &remoteClient{Client: c, dev: dev, conn: conn}, nil
}

// Close closes the client, its connection and its device.
func (c *remoteClient) Close() error {
	err := c.Client.Close()
	c.conn.Close()
	c.dev.Close()
	return err
}

var _ io.Closer = (*remoteClient)(nil)
