package rpctree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	gbtree "github.com/google/btree"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Tree limits of the service: btree's.
const (
	MaxKey   = btree.MaxKey
	MaxValue = btree.MaxValue
)

// Recvs is the receives a server keeps posted per client; a client's
// Slots must not exceed it.
const Recvs = 64

// QPCap is the queue sizes of a client's connection (both ends).
var QPCap = verbs.QPCap{MaxSendWR: 256, MaxRecvWR: Recvs + 8, MaxSendSGE: 1, MaxRecvSGE: 1}

// item is one key and its value in the server's tree.
type item struct{ k, v []byte }

func less(a, b item) bool { return bytes.Compare(a.k, b.k) < 0 }

// Service holds the tree and serves it to every client of a memory
// node server (memnode.Service).
type Service struct {
	dev   verbs.Device
	pd    verbs.PD
	mu    sync.RWMutex
	tree  *gbtree.BTreeG[item]
	calls atomic.Uint64
}

var _ memnode.Service = (*Service)(nil)

// NewService is a memnode.NewServiceFunc: an empty tree.
func NewService(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
	return &Service{dev: dev, pd: pd, tree: gbtree.NewG(32, less)}, nil
}

// Name implements memnode.Service.
func (s *Service) Name() string { return Name }

// Admit implements memnode.Service.
func (s *Service) Admit(service string) error { return memnode.AdmitOnly(Name, service) }

// Describe implements memnode.Service.
func (s *Service) Describe(*memnode.Info) {}

// Close implements memnode.Service.
func (s *Service) Close() error { return nil }

// Len is the keys in the tree.
func (s *Service) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tree.Len()
}

// Calls is the calls served so far.
func (s *Service) Calls() uint64 { return s.calls.Load() }

// Open implements memnode.Service: a client's CQ and RPC server (calls
// wait parked: the server's cores are the tree's).
func (s *Service) Open() (memnode.Session, error) {
	cq, err := s.dev.CreateCQ(2 * (QPCap.MaxSendWR + QPCap.MaxRecvWR))
	if err != nil {
		return nil, err
	}
	srv := rpc.NewServer(rpc.ServerConfig{MaxMessage: MaxMessage, Recvs: Recvs, Poll: verbs.PollEvent})
	srv.Handle(MethodGet, s.get)
	srv.Handle(MethodPut, s.put)
	srv.Handle(MethodDelete, s.del)
	srv.Handle(MethodScan, s.scan)
	return &session{s: s, cq: cq, rpc: srv}, nil
}

func (s *Service) get(req, resp []byte) (int, error) {
	s.calls.Add(1)
	if err := btree.Check(req, nil, MaxKey, MaxValue); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, ok := s.tree.Get(item{k: req})
	if !ok {
		resp[0] = 0
		return 1, nil
	}
	resp[0] = 1
	return 1 + copy(resp[1:], it.v), nil
}

func (s *Service) put(req, _ []byte) (int, error) {
	s.calls.Add(1)
	if len(req) < 1 || len(req) < 1+int(req[0]) {
		return 0, errProtocol
	}
	k, v := req[1:1+int(req[0])], req[1+int(req[0]):]
	if err := btree.Check(k, v, MaxKey, MaxValue); err != nil {
		return 0, err
	}
	b := make([]byte, len(k)+len(v)) // req is the rpc buffer's: copy
	copy(b, k)
	copy(b[len(k):], v)
	s.mu.Lock()
	s.tree.ReplaceOrInsert(item{k: b[:len(k)], v: b[len(k):]})
	s.mu.Unlock()
	return 0, nil
}

func (s *Service) del(req, _ []byte) (int, error) {
	s.calls.Add(1)
	if err := btree.Check(req, nil, MaxKey, MaxValue); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.tree.Delete(item{k: req})
	s.mu.Unlock()
	return 0, nil
}

// scan answers the keys in [from, to) from from on, as many as fit the
// response (and limit); the first byte says whether there are more.
func (s *Service) scan(req, resp []byte) (int, error) {
	s.calls.Add(1)
	from, to, limit, err := parseScanReq(req)
	if err != nil {
		return 0, err
	}
	out := resp[:1]
	out[0] = 0
	n := 0
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.tree.AscendGreaterOrEqual(item{k: from}, func(it item) bool {
		if to != nil && bytes.Compare(it.k, to) >= 0 {
			return false
		}
		if limit > 0 && n == limit {
			return false
		}
		if len(out)+entrySize(it.k, it.v) > len(resp) {
			out[0] = 1
			return false
		}
		out = appendEntry(out, it.k, it.v)
		n++
		return true
	})
	return len(out), nil
}

// session is one client connection.
type session struct {
	s    *Service
	cq   verbs.CQ
	rpc  *rpc.Server
	conn *rpc.ServerConn
}

// Options implements memnode.Session: the reply names the service, so
// that a client learns it reached an RPC tree (a memory node without a
// token takes any client's hello for a token).
func (ss *session) Options() cm.Options {
	return cm.Options{SendCQ: ss.cq, RecvCQ: ss.cq, Cap: QPCap, Access: verbs.AccessAll, PrivateData: []byte(Name)}
}

// Prepare posts the client's receives before it may send.
func (ss *session) Prepare(qp verbs.QP) error {
	c, err := ss.rpc.Attach(ss.s.pd, qp)
	if err != nil {
		return fmt.Errorf("rpctree: %w", err)
	}
	ss.conn = c
	return nil
}

// Serve implements memnode.Session.
func (ss *session) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	if ss.conn == nil {
		return ss.rpc.Serve(ctx, ss.s.pd, qp, cq)
	}
	return ss.conn.Serve(ctx, cq)
}

// Close implements memnode.Session.
func (ss *session) Close() error {
	var err error
	if ss.conn != nil {
		err = ss.conn.Close()
	}
	return errors.Join(err, ss.cq.Destroy())
}
