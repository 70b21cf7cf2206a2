package race

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestFreeRefusesDoubleFree: a client gives back memory the node handed
// it, then gives it back again, and gives back another client's: the
// node refuses the second free and the foreign one, so the memory enters
// the pool once and no two later clients share it.
func TestFreeRefusesDoubleFree(t *testing.T) {
	node, err := verbs.Open("loop://race-double-free/node")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	npd, err := node.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(npd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := rpcClient(t, s, node, npd, "a"), rpcClient(t, s, node, npd, "b")
	alloc := func(c *rpc.Client) uint64 {
		t.Helper()
		req := binary.LittleEndian.AppendUint32(nil, chunkSize)
		var resp [8]byte
		if _, err := c.Call(ctx, methodAlloc, req, resp[:]); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(resp[:])
	}
	free := func(c *rpc.Client, addr uint64, n uint32) error {
		req := binary.LittleEndian.AppendUint64(nil, addr)
		_, err := c.Call(ctx, methodFree, binary.LittleEndian.AppendUint32(req, n), nil)
		return err
	}
	heldNow := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.held) }
	chunkA, chunkB := alloc(a), alloc(b)
	if err := free(a, chunkA, 4*blockUnit); err != nil {
		t.Fatalf("a first free: %v", err)
	}
	if err := free(a, chunkA, 4*blockUnit); err == nil {
		t.Errorf("a second free of the same blocks was accepted")
	}
	if err := free(a, chunkA+blockUnit, blockUnit); err == nil {
		t.Errorf("a free inside blocks given back already was accepted")
	}
	if err := free(a, chunkB, blockUnit); err == nil {
		t.Errorf("a free of another client's chunk was accepted")
	}
	if n := heldNow(); n != 1 {
		t.Fatalf("%d ranges in quarantine, want 1", n)
	}
	// The rest of the chunks go back once, whole.
	if err := free(a, chunkA+4*blockUnit, chunkSize-4*blockUnit); err != nil {
		t.Errorf("a frees the rest of its chunk: %v", err)
	}
	if err := free(b, chunkB, chunkSize); err != nil {
		t.Errorf("b frees its chunk: %v", err)
	}
	if n := heldNow(); n != 3 {
		t.Fatalf("%d ranges in quarantine, want 3", n)
	}
}

// rpcClient is an RPC client of s on a new loop device named name.
func rpcClient(t *testing.T, s *Server, nodeDev verbs.Device, npd verbs.PD, name string) *rpc.Client {
	t.Helper()
	dev, err := verbs.Open("loop://race-double-free/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mk := func(d verbs.Device, pd verbs.PD) (verbs.QP, verbs.CQ) {
		cq, err := d.CreateCQ(2048)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 512, MaxRecvWR: 512}})
		if err != nil {
			t.Fatal(err)
		}
		return qp, cq
	}
	cqp, ccq := mk(dev, pd)
	sqp, scq := mk(nodeDev, npd)
	if err := sqp.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}); err != nil {
		t.Fatal(err)
	}
	conn, err := s.Attach(sqp)
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(sqp, verbs.AccessAll, dev.Address(), cqp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(cqp, verbs.AccessAll, nodeDev.Address(), sqp.QPN()); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = conn.Serve(sctx, scq) }()
	c, err := rpc.NewClient(pd, cqp, ccq, rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); stop(); <-done })
	return c
}
