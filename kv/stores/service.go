package stores

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Layout is the node layout design's clients need: RACE and Smart-HT
// share one, "race".
func Layout(design string) string {
	if design == "smart-ht" {
		return "race"
	}
	return design
}

// CheckDesign returns an error naming the designs when design is not
// one of them.
func CheckDesign(design string) error {
	if !slices.Contains(Designs, design) {
		return fmt.Errorf("%w: no store design %q (want one of %v)", verbs.ErrInvalidArg, design, Designs)
	}
	return nil
}

// Service returns what a memnode.Server needs to serve a node of design
// sized for keys keys of value bytes (see NewServer): the server then
// gives the store node the memory node's lifecycle — concurrent
// handshakes, the token check, liveness probes, and every client's QP,
// CQ and goroutine freed when it departs. Clients ask for the design (or
// another one with the same Layout) in memnode.Hello.Service.
func Service(design string, keys int64, value int) memnode.NewServiceFunc {
	return func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
		if err := CheckDesign(design); err != nil {
			return nil, err
		}
		srv, err := NewServer(Layout(design), pd, keys, value)
		if err != nil {
			return nil, err
		}
		return &service{layout: Layout(design), srv: srv, dev: dev}, nil
	}
}

// clientCQ is the depth of a client's CQ at the node.
const clientCQ = 4096

// service is a store node as a memnode.Service.
type service struct {
	layout string
	srv    Server
	dev    verbs.Device
}

// Name is the node's layout.
func (s *service) Name() string { return s.layout }

// Admit takes the clients of every design with the node's layout.
func (s *service) Admit(design string) error {
	if Layout(design) != s.layout {
		return fmt.Errorf("this node serves %s, not %q", s.layout, design)
	}
	return nil
}

// Describe has nothing to add: the store's layout travels by RPC.
func (s *service) Describe(*memnode.Info) {}

// Close releases the store's memory.
func (s *service) Close() error { return s.srv.Close() }

// Open creates a client's CQ.
func (s *service) Open() (memnode.Session, error) {
	cq, err := s.dev.CreateCQ(clientCQ)
	if err != nil {
		return nil, err
	}
	return &session{srv: s.srv, cq: cq}, nil
}

// session is one client of a store node.
type session struct {
	srv  Server
	cq   verbs.CQ
	conn *rpc.ServerConn // once prepared
}

// Options: the client's CQ, QPCap, full access, and the clients' retry
// timeout for the node's own SENDs (RPC answers).
func (s *session) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: QPCap, Access: verbs.AccessAll, Timeout: ClientTimeout}
}

// Prepare posts the client's receives on its new QP, before the node's
// reply lets the client send its first RPC.
func (s *session) Prepare(qp verbs.QP) error {
	c, err := s.srv.Attach(qp)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

// Serve runs the store's server side for the client.
func (s *session) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	if s.conn == nil {
		return s.srv.Serve(ctx, qp, cq)
	}
	return s.conn.Serve(ctx, cq)
}

// Close frees the client's receive buffers (when never served) and
// destroys its CQ.
func (s *session) Close() error {
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(err, s.cq.Destroy())
}
