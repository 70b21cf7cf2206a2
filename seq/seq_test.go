package seq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/seq"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

func TestCheck(t *testing.T) {
	if s, err := seq.Check([]uint64{10, 13, 11}, []int{1, 2, 2}); err != nil || s != 10 {
		t.Errorf("good blocks: %d, %v", s, err)
	}
	if _, err := seq.Check([]uint64{10, 12}, []int{1, 1}); !errors.Is(err, seq.ErrGap) {
		t.Errorf("a gap: %v", err)
	}
	if _, err := seq.Check([]uint64{10, 11, 11}, []int{2, 1, 1}); !errors.Is(err, seq.ErrGap) {
		t.Errorf("a duplicate: %v", err)
	}
}

var fab atomic.Int64

type end struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
}

func connected(t testing.TB) (client, server *end) {
	t.Helper()
	f := fab.Add(1)
	open := func(name string) *end {
		d, err := verbs.Open(fmt.Sprintf("loop://seq%d/%s", f, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		pd, _ := d.AllocPD()
		cq, _ := d.CreateCQ(1024)
		qp, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 512, MaxRecvWR: 512}})
		mr, _ := pd.AllocMR(4096, verbs.AccessAll)
		return &end{d, pd, cq, qp, mr}
	}
	client, server = open("client"), open("server")
	if err := verbs.ConnectRC(client.qp, verbs.AccessAll, server.dev.Address(), server.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(server.qp, verbs.AccessAll, client.dev.Address(), client.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	return client, server
}

// hammer runs goroutines taking blocks of 1 or blocksize numbers and
// checks the union is unique and gap-free from want.
func hammer(t *testing.T, s seq.Sequencer, blocksize int, want uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var firsts []uint64
	var lens []int
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				n := 1
				if blocksize > 1 && (i+g)%3 == 0 {
					n = blocksize
				}
				v, err := s.Next(ctx, n)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				firsts, lens = append(firsts, v), append(lens, n)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	start, err := seq.Check(firsts, lens)
	if err != nil {
		t.Fatal(err)
	}
	if start != want {
		t.Errorf("numbers start at %d, want %d", start, want)
	}
}

func TestFAA(t *testing.T) {
	c, s := connected(t)
	f, err := seq.NewFAA(c.qp, c.cq, c.mr, s.mr.Addr(), s.mr.RKey(), 16, verbs.PollAdaptive)
	if err != nil {
		t.Fatal(err)
	}
	hammer(t, f, 5, 0)
	f.Close()
	if _, err := f.Next(context.Background(), 1); !errors.Is(err, seq.ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
}

// TestFAAPipelined mixes pipelines longer than the slots (posted in
// parts) with single calls, and checks the numbers.
func TestFAAPipelined(t *testing.T) {
	c, s := connected(t)
	f, err := seq.NewFAA(c.qp, c.cq, c.mr, s.mr.Addr(), s.mr.RKey(), 16, verbs.PollAdaptive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if err := f.NextPipelined(ctx, 1, nil); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("an empty pipeline: %v", err)
	}
	var mu sync.Mutex
	var firsts []uint64
	var lens []int
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			out := make([]uint64, 24)
			for i := 0; i < 50; i++ {
				k, n := len(out), 3
				if g == 0 {
					k, n = 1, 1
				}
				if err := f.NextPipelined(ctx, n, out[:k]); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, v := range out[:k] {
					firsts, lens = append(firsts, v), append(lens, n)
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if start, err := seq.Check(firsts, lens); err != nil || start != 0 {
		t.Fatalf("numbers from %d: %v", start, err)
	}
	if len(firsts) != 50+3*50*24 {
		t.Errorf("%d blocks, want %d", len(firsts), 50+3*50*24)
	}
}

func TestRPCSequencer(t *testing.T) {
	c, s := connected(t)
	srv := rpc.NewServer(rpc.ServerConfig{})
	seq.NewRPCServer(srv, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, s.pd, s.qp, s.cq)
	cl, err := rpc.NewClient(c.pd, c.qp, c.cq, rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hammer(t, seq.NewRPC(cl), 8, 1000)
}

func TestHeaderOnlyAcrossTheHighBits(t *testing.T) {
	c, s := connected(t)
	start := uint64(1)<<32 - 500 // the guesses must follow the high bits over 2^32
	srv := seq.NewHeaderOnlyServer(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, s.qp, s.cq, 256, verbs.PollAdaptive)
	h, err := seq.NewHeaderOnly(c.qp, c.cq, 256, verbs.PollAdaptive)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Next(ctx, 2); !errors.Is(err, seq.ErrOneAtATime) {
		t.Errorf("Next(2): %v", err)
	}
	hammer(t, h, 1, start)
	h.Close()
}
