package rpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

var seq atomic.Int64

// conn is one side of a connection.
type conn struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
}

func pair(t testing.TB, scheme string) (client, server *conn) {
	t.Helper()
	open := func(name string) *conn {
		uri := fmt.Sprintf("loop://rpc%d/%s", seq.Load(), name)
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
	seq.Add(1)
	client, server = open("client"), open("server")
	if err := verbs.ConnectRC(client.qp, verbs.AccessAll, server.dev.Address(), server.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(server.qp, verbs.AccessAll, client.dev.Address(), client.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	return client, server
}

const (
	methodAdd  = 1
	methodFail = 2
	methodSlow = 3
)

func newServer() *rpc.Server {
	s := rpc.NewServer(rpc.ServerConfig{})
	s.Handle(methodAdd, func(req, resp []byte) (int, error) {
		if len(req) != 16 {
			return 0, fmt.Errorf("want 16 bytes, got %d", len(req))
		}
		binary.LittleEndian.PutUint64(resp, binary.LittleEndian.Uint64(req)+binary.LittleEndian.Uint64(req[8:]))
		return 8, nil
	})
	s.Handle(methodFail, func(req, resp []byte) (int, error) { return 0, errors.New("refused") })
	s.Handle(methodSlow, func(req, resp []byte) (int, error) {
		time.Sleep(50 * time.Millisecond)
		return copy(resp, req), nil
	})
	return s
}

// The modes of requests: SEND into a receive, HERD WRITEs from
// registered memory, HERD WRITEs inline.
var modes = []struct {
	name string
	cfg  rpc.ClientConfig
}{
	{"send", rpc.ClientConfig{}},
	{"herd", rpc.ClientConfig{Herd: true}},
	{"herd-inline", rpc.ClientConfig{Herd: true, Inline: verbs.DefaultMaxInlineData}},
}

func TestRPC(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		for _, mode := range modes {
			t.Run(scheme+"/"+mode.name, func(t *testing.T) { testRPC(t, scheme, mode.cfg) })
		}
	}
}

func testRPC(t *testing.T, scheme string, cfg rpc.ClientConfig) {
	cl, sv := pair(t, scheme)
	srv := newServer()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, sv.pd, sv.qp, sv.cq) }()
	c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Many goroutines, many calls, pipelined.
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			req, resp := make([]byte, 16), make([]byte, 8)
			for i := 0; i < 200; i++ {
				binary.LittleEndian.PutUint64(req, uint64(g))
				binary.LittleEndian.PutUint64(req[8:], uint64(i))
				n, err := c.Call(context.Background(), methodAdd, req, resp)
				if err != nil || n != 8 || binary.LittleEndian.Uint64(resp) != uint64(g+i) {
					t.Errorf("add(%d, %d) = %d bytes %d, %v", g, i, n, binary.LittleEndian.Uint64(resp), err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	var re *rpc.RemoteError
	if _, err := c.Call(context.Background(), methodFail, nil, nil); !errors.As(err, &re) || re.Msg != "refused" {
		t.Errorf("failing method: %v", err)
	}
	if _, err := c.Call(context.Background(), 99, nil, nil); !errors.Is(err, rpc.ErrNoMethod) {
		t.Errorf("unknown method: %v", err)
	}
	if _, err := c.Call(context.Background(), methodAdd, make([]byte, rpc.DefaultMaxMessage), nil); !errors.Is(err, rpc.ErrTooLarge) {
		t.Errorf("oversized request: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 5*time.Millisecond)
	if _, err := c.Call(short, methodSlow, []byte("x"), make([]byte, 8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow call with a 5 ms deadline: %v", err)
	}
	cancelShort()
	// The connection still works after the abandoned call.
	resp := make([]byte, 8)
	if n, err := c.Call(context.Background(), methodSlow, []byte("again"), resp); err != nil || string(resp[:n]) != "again" {
		t.Errorf("after a timeout: %q, %v", resp[:n], err)
	}
	c.Close()
	if _, err := c.Call(context.Background(), methodAdd, make([]byte, 16), resp); !errors.Is(err, rpc.ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestHerdRegion drives a server's HERD request region by hand: the open
// call's answer names a region the server polls; a closing word with a
// bad length is dropped, a good one runs the handler, a second open is
// refused, and the SEND path keeps working throughout.
func TestHerdRegion(t *testing.T) {
	cl, sv := pair(t, "loop")
	srv := newServer()
	var ran atomic.Int64
	srv.Handle(7, func(req, resp []byte) (int, error) { ran.Add(1); return 0, nil })
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	defer func() { cancel(); <-served }() // before the devices close
	go func() {
		defer close(served)
		if err := srv.Serve(ctx, sv.pd, sv.qp, sv.cq); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, rpc.ClientConfig{Slots: 8, MaxMessage: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	open := make([]byte, 8)
	binary.LittleEndian.PutUint32(open, 4)
	binary.LittleEndian.PutUint32(open[4:], 64)
	ans := make([]byte, 16)
	if n, err := c.Call(ctx, rpc.MethodHerdOpen, open, ans); err != nil || n != 16 {
		t.Fatalf("open: %d bytes, %v", n, err)
	}
	raddr, rkey, stride := binary.LittleEndian.Uint64(ans), binary.LittleEndian.Uint32(ans[8:]), binary.LittleEndian.Uint32(ans[12:])
	if stride != 72 {
		t.Fatalf("stride %d, want 72", stride)
	}
	var re *rpc.RemoteError
	if _, err := c.Call(ctx, rpc.MethodHerdOpen, open, ans); !errors.As(err, &re) {
		t.Errorf("second open: %v, want a remote error", err)
	}
	// Unsignaled WRITEs on the client's QP (its poller owns the CQ),
	// from a registered buffer: two bad closing words on slot 0, then a
	// good request in slot 2.
	mr, err := cl.pd.AllocMR(64, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	b := mr.Bytes()
	for _, n := range []int{1, 2} {
		binary.LittleEndian.PutUint32(b[8*n:], 65536) // longer than the slot
		binary.LittleEndian.PutUint32(b[8*n+4:], uint32(n))
	}
	binary.LittleEndian.PutUint16(b[24:], 7) // the request: method 7, id 0
	binary.LittleEndian.PutUint32(b[32:], rpc.Header)
	binary.LittleEndian.PutUint32(b[36:], 1)
	sge := func(off, n int) []verbs.SGE {
		return []verbs.SGE{{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}}
	}
	err = cl.qp.PostSend([]verbs.SendWR{
		{Opcode: verbs.OpWrite, SGL: sge(8, 8), RemoteAddr: raddr + uint64(stride) - 8, RKey: rkey},
		{Opcode: verbs.OpWrite, SGL: sge(16, 8), RemoteAddr: raddr + uint64(stride) - 8, RKey: rkey},
		{Opcode: verbs.OpWrite, SGL: sge(24, rpc.Header), RemoteAddr: raddr + 2*uint64(stride), RKey: rkey},
		{Opcode: verbs.OpWrite, SGL: sge(32, 8), RemoteAddr: raddr + 3*uint64(stride) - 8, RKey: rkey},
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ran.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // time to run it twice, were it taken twice
	if got := ran.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1 (the malformed words must be dropped)", got)
	}
	resp := make([]byte, 8)
	if n, err := c.Call(ctx, methodSlow, []byte("still"), resp); err != nil || string(resp[:n]) != "still" {
		t.Errorf("SEND path after HERD requests: %q, %v", resp[:n], err)
	}
}
