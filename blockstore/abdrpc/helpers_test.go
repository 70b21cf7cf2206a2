package abdrpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var (
	seq     atomic.Int64
	discard = slog.New(slog.DiscardHandler)
)

// small keeps the replicas' regions small: the tests use few blocks.
var small = replica.Config{MaxMemory: 16 << 20, Spare: 64, Stock: 16, ReturnSlots: 64}

// cluster is n replicas, each a memnode server on one loop fabric
// (nodes r0, r1, …), and the clients' devices on it.
type cluster struct {
	t       testing.TB
	fabric  string
	token   string
	srvs    []*memnode.Server
	addrs   []string
	clients atomic.Int64
}

// startCluster serves n replicas; newService, when not nil, serves
// replica i instead of a real replica.
func startCluster(t testing.TB, n int, token string, newService func(i int) memnode.NewServiceFunc) *cluster {
	t.Helper()
	cl := &cluster{t: t, fabric: fmt.Sprintf("abdrpc-%d", seq.Add(1)), token: token}
	for i := range n {
		ns := replica.Service(small, nil)
		if newService != nil && newService(i) != nil {
			ns = newService(i)
		}
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: fmt.Sprintf("loop://%s/r%d", cl.fabric, i),
			CM: "127.0.0.1:0", Token: token, Probe: 20 * time.Millisecond, NewService: ns, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		cl.srvs = append(cl.srvs, srv)
		cl.addrs = append(cl.addrs, srv.Info().CM)
	}
	return cl
}

// config is a client's configuration: a device of its own on the
// fabric.
func (cl *cluster) config() abdrpc.Config {
	return abdrpc.Config{Replicas: cl.addrs, Device: fmt.Sprintf("loop://%s/c%d", cl.fabric, cl.clients.Add(1)),
		Token: cl.token, Logger: discard}
}

// dialAs connects a client whose device is node name of the fabric.
func (cl *cluster) dialAs(name string) *abdrpc.Client {
	cl.t.Helper()
	cfg := cl.config()
	cfg.Device = fmt.Sprintf("loop://%s/%s", cl.fabric, name)
	c, err := abdrpc.Dial(ctx5(cl.t), cfg)
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.t.Cleanup(func() { c.Close() })
	return c
}

// rawWrite calls MethodWrite of ⟨tag, data⟩ at replica rep alone, as a
// writer that died half-way through its second phase leaves it.
func (cl *cluster) rawWrite(rep int, id uint64, tag replica.Tag, data []byte) {
	t := cl.t
	t.Helper()
	dev, err := verbs.Open(fmt.Sprintf("loop://%s/raw%d", cl.fabric, cl.clients.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(64)
	defer cq.Destroy()
	ctx := ctx5(t)
	conn, err := cm.Dial(ctx, dev, cl.addrs[rep], cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: replica.QPCap,
		Access: verbs.AccessAll, PrivateData: memnode.Hello{Service: replica.Name, Token: cl.token}.Marshal()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := rpc.NewClient(pd, conn.QP(), cq, rpc.ClientConfig{MaxMessage: replica.MaxMessage(len(data)), Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := append(binary.LittleEndian.AppendUint64(u64(id, 0), uint64(tag)), data...)
	resp := make([]byte, 9)
	if n, err := c.Call(ctx, replica.MethodWrite, req, resp); err != nil || n != 9 || resp[8] != 1 {
		t.Fatalf("raw write at replica %d: %x, %v", rep, resp[:n], err)
	}
}

// fab is the cluster's loop fabric (Pause, Resume, Kill).
func (cl *cluster) fab() *loop.Fabric { return loop.Get(cl.fabric) }

// create makes a volume of blocks blocks of bs bytes.
func (cl *cluster) create(bs int, blocks uint64) {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := abdrpc.Create(ctx, cl.config(), blockstore.Layout{BlockSize: bs, Blocks: blocks}); err != nil {
		cl.t.Fatal(err)
	}
}

// dial connects a client, closed when the test ends.
func (cl *cluster) dial() *abdrpc.Client {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := abdrpc.Dial(ctx, cl.config())
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.t.Cleanup(func() { c.Close() })
	return c
}

// ctx5 is a context that ends in 5 s: no test operation takes that long
// unless it hangs.
func ctx5(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// liar is a replica that holds a volume of one 512-byte block on the
// replicas it is told, grants claims and answers MethodReadTag,
// MethodRead and MethodWrite with garbage (the answers answer gives).
type liar struct {
	dev      verbs.Device
	pd       verbs.PD
	replicas func() []string
	answer   map[uint16][]byte
	claim    func(req []byte) error // when set, decides MethodClaim
}

// liarService serves a liar of a volume on replicas() (called when a
// client connects, once the cluster is up).
func liarService(replicas func() []string, answer map[uint16][]byte) memnode.NewServiceFunc {
	return func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
		return &liar{dev: dev, pd: pd, replicas: replicas, answer: answer}, nil
	}
}

func (l *liar) Name() string           { return replica.Name }
func (l *liar) Admit(string) error     { return nil }
func (l *liar) Describe(*memnode.Info) {}
func (l *liar) Close() error           { return nil }
func (l *liar) Open() (memnode.Session, error) {
	cq, err := l.dev.CreateCQ(256)
	if err != nil {
		return nil, err
	}
	srv := rpc.NewServer(rpc.ServerConfig{MaxMessage: replica.MaxMessage(blockstore.MaxBlockSize), Recvs: 16})
	srv.Handle(replica.MethodInfo, func(_, resp []byte) (int, error) {
		in := replica.Info{Layout: blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: l.replicas()}, RingSlots: 1,
			BufSize: uint32(replica.BufHead + 512)}
		b, err := in.Marshal()
		return copy(resp, b), err
	})
	srv.Handle(replica.MethodClaim, func(req, resp []byte) (int, error) {
		if l.claim != nil {
			if err := l.claim(req); err != nil {
				return 0, err
			}
		}
		resp[0] = 1
		return 1, nil
	})
	for m, a := range l.answer {
		srv.Handle(m, func(_, resp []byte) (int, error) { return copy(resp, a), nil })
	}
	return &liarSession{l: l, cq: cq, srv: srv}, nil
}

type liarSession struct {
	l    *liar
	cq   verbs.CQ
	srv  *rpc.Server
	conn *rpc.ServerConn
}

// Prepare posts the receives before the client may send.
func (s *liarSession) Prepare(qp verbs.QP) (err error) {
	s.conn, err = s.srv.Attach(s.l.pd, qp)
	return err
}

func (s *liarSession) Options() cm.Options {
	return cm.Options{SendCQ: s.cq, RecvCQ: s.cq, Cap: replica.QPCap, Access: verbs.AccessAll, Timeout: replica.ClientTimeout}
}

func (s *liarSession) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ) error {
	return s.conn.Serve(ctx, cq)
}

func (s *liarSession) Close() error {
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(err, s.cq.Destroy())
}

// u64 is v little-endian, then pad zero bytes.
func u64(v uint64, pad int) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, v), make([]byte, pad)...)
}
