package stores_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// lateService wraps a store node's service so that each session's Serve
// starts only once the client's first request has arrived at the node:
// a request that arrives finds a receive that Serve did not post.
type lateService struct{ memnode.Service }

func (s lateService) Open() (memnode.Session, error) {
	sess, err := s.Service.Open()
	if err != nil {
		return nil, err
	}
	if p, ok := sess.(memnode.Preparer); ok {
		return latePreparer{lateSession{sess}, p}, nil
	}
	return lateSession{sess}, nil
}

type lateSession struct{ memnode.Session }

// Serve waits for the first completion on cq before serving, then hands
// it to the session's Serve.
func (s lateSession) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	late, err := kvtest.Late(ctx, cq)
	if err != nil {
		return nil // the node closes
	}
	return s.Session.Serve(ctx, qp, late)
}

type latePreparer struct {
	lateSession
	p memnode.Preparer
}

func (s latePreparer) Prepare(qp verbs.QP) error { return s.p.Prepare(qp) }

// TestFirstRPCFindsReceives connects clients that do not retry RNR at
// all to store nodes served by memnode whose sessions start serving only
// after the first request has arrived: the node's receives are posted
// before its reply lets the client send, so the first RPC (the client's
// layout request) succeeds.
func TestFirstRPCFindsReceives(t *testing.T) {
	ctx := context.Background()
	for _, design := range []string{"pilaf", "prism-kv", "race"} {
		t.Run(design, func(t *testing.T) {
			newService := stores.Service(design, 1000, 64)
			srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://stores-prepare-" + design + "/node", CM: "127.0.0.1:0",
				NewService: func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
					svc, err := newService(dev, pd)
					if err != nil {
						return nil, err
					}
					return lateService{svc}, nil
				}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			dev, err := verbs.Open("loop://stores-prepare-" + design + "/client")
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			pd, _ := dev.AllocPD()
			cq, _ := dev.CreateCQ(4096)
			conn, err := cm.Dial(ctx, dev, srv.Info().CM, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap,
				Access: verbs.AccessAll, RNRRetry: verbs.NoRNRRetry, PrivateData: memnode.Hello{Service: design}.Marshal()})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			c, err := stores.NewClient(ctx, design, pd, conn.QP(), cq, stores.ClientOptions{})
			if err != nil {
				t.Fatalf("first RPC: %v", err)
			}
			defer c.Close()
			if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
