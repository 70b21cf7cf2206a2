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

func pair(t *testing.T, scheme string) (client, server *conn) {
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

func TestSendRecvRPC(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			cl, sv := pair(t, scheme)
			srv := newServer()
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, sv.pd, sv.qp, sv.cq) }()
			c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, rpc.ClientConfig{})
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
		})
	}
}
