package smart_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// roundBed is two memory nodes and a runtime of one worker over them.
type roundBed struct {
	fabric string
	nodes  []*memoryNode
	buf    verbs.MR
	rt     *smart.Runtime
}

func newRoundBed(t *testing.T, cfg smart.Config) *roundBed {
	t.Helper()
	b := &roundBed{fabric: fmt.Sprintf("smart%d", fabricSeq.Add(1))}
	b.nodes = []*memoryNode{newMemoryNode(t, b.fabric, "m0"), newMemoryNode(t, b.fabric, "m1")}
	dev, pd, buf := newClient(t, b.fabric)
	b.buf = buf
	cfg.Device, cfg.PD = dev, pd
	cfg.Nodes = []smart.ConnectFunc{b.nodes[0].connect(dev), b.nodes[1].connect(dev)}
	cfg.Workers = 1
	rt, err := smart.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	b.rt = rt
	return b
}

// sge is n bytes of the client buffer at off.
func (b *roundBed) sge(off, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: b.buf.Addr() + uint64(off), Length: uint32(n), LKey: b.buf.LKey()}}
}

// write is a WRITE of 8 bytes of the buffer at loc to node n's offset off.
func (b *roundBed) write(n, off, loc int) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpWrite, SGL: b.sge(loc, 8), RemoteAddr: b.nodes[n].mr.Addr() + uint64(off), RKey: b.nodes[n].mr.RKey()}
}

// read is a READ of 8 bytes at node n's offset off into the buffer at loc.
func (b *roundBed) read(n, off, loc int) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpRead, SGL: b.sge(loc, 8), RemoteAddr: b.nodes[n].mr.Addr() + uint64(off), RKey: b.nodes[n].mr.RKey()}
}

// TestDoAllRound posts a round of lists to two nodes — one of 600
// requests, more than a wr_id's size field counts — under a fixed limit
// smaller than the round: every request runs, in order per node, and
// the worker's credits all come back.
func TestDoAllRound(t *testing.T) {
	b := newRoundBed(t, smart.Config{Limit: 8})
	w := b.rt.Workers()[0]
	tk, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Leave()
	for i := range 600 {
		binary.NativeEndian.PutUint64(b.buf.Bytes()[8*i:], uint64(1000+i))
	}
	// Node 0: 300 WRITEs then 300 READs of what they wrote (RC order).
	var big []verbs.SendWR
	for i := range 300 {
		big = append(big, b.write(0, 8*i, 8*i))
	}
	for i := range 300 {
		big = append(big, b.read(0, 8*i, 8192+8*i))
	}
	small := []verbs.SendWR{b.write(1, 0, 8*599), b.read(1, 0, 8192+8*300)}
	for round := range 3 {
		clear(b.buf.Bytes()[8192 : 8192+8*301])
		if err := tk.DoAll(context.Background(), []smart.List{{Node: 0, WRs: big}, {Node: 1, WRs: small}}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range 300 {
			if got := binary.NativeEndian.Uint64(b.buf.Bytes()[8192+8*i:]); got != uint64(1000+i) {
				t.Fatalf("round %d: node 0 read back %d at %d, want %d", round, got, i, 1000+i)
			}
		}
		if got := binary.NativeEndian.Uint64(b.buf.Bytes()[8192+8*300:]); got != 1599 {
			t.Fatalf("round %d: node 1 read back %d, want 1599", round, got)
		}
	}
	st := w.Stats()
	if st.Credits != st.Limit || st.Limit != 8 {
		t.Errorf("after the rounds: %d credits of a limit of %d, want all 8 back", st.Credits, st.Limit)
	}
	if st.Completed != 3*602 {
		t.Errorf("%d requests completed, want %d", st.Completed, 3*602)
	}
}

// TestDoAllFailure: a list with a bad rkey fails the round, after the
// other node's list completed; the credits come back.
func TestDoAllFailure(t *testing.T) {
	b := newRoundBed(t, smart.Config{Throttle: true, Limit: 16})
	w := b.rt.Workers()[0]
	tk, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint64(b.buf.Bytes(), 77)
	bad := b.write(1, 0, 0)
	bad.RKey ^= 0xdead
	err = tk.DoAll(context.Background(), []smart.List{{Node: 0, WRs: []verbs.SendWR{b.write(0, 64, 0)}}, {Node: 1, WRs: []verbs.SendWR{b.read(1, 0, 8), bad, b.read(1, 8, 16)}}})
	if err == nil {
		t.Fatal("a round with a bad rkey succeeded")
	}
	var se *verbs.StatusError
	if !errors.As(err, &se) {
		t.Errorf("round error %v: want a status error", err)
	}
	if got := binary.NativeEndian.Uint64(b.nodes[0].mr.Bytes()[64:]); got != 77 {
		t.Errorf("node 0 holds %d, want 77 (its list completed)", got)
	}
	tk.Leave()
	if st := w.Stats(); st.Credits != st.Limit {
		t.Errorf("%d credits of %d after a failed round", st.Credits, st.Limit)
	}
	if err := tk.DoAll(context.Background(), []smart.List{{Node: 0, WRs: nil}}); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("an empty list: %v, want ErrInvalidArg", err)
	}
}

// TestDoAllAbandoned: a round whose context ends while a node is paused
// returns the context's error with its lists in flight; WaitFor says so
// until the node resumes, and the task's next round works.
func TestDoAllAbandoned(t *testing.T) {
	b := newRoundBed(t, smart.Config{})
	w := b.rt.Workers()[0]
	tk, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Leave()
	fab := loop.Get(b.fabric)
	if err := fab.Pause("m1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	binary.NativeEndian.PutUint64(b.buf.Bytes(), 5)
	err = tk.DoAll(ctx, []smart.List{{Node: 0, WRs: []verbs.SendWR{b.write(0, 0, 0)}}, {Node: 1, WRs: []verbs.SendWR{b.write(1, 0, 0)}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("round to a paused node: %v, want the deadline", err)
	}
	if tk.WaitFor(10 * time.Millisecond) {
		t.Fatal("WaitFor: nothing in flight while node m1 is paused")
	}
	if err := fab.Resume("m1"); err != nil {
		t.Fatal(err)
	}
	if !tk.WaitFor(5 * time.Second) {
		t.Fatal("the list to m1 never completed after Resume")
	}
	if got := binary.NativeEndian.Uint64(b.nodes[1].mr.Bytes()); got != 5 {
		t.Fatalf("m1 holds %d, want 5", got)
	}
	binary.NativeEndian.PutUint64(b.buf.Bytes(), 6)
	if err := tk.DoAll(context.Background(), []smart.List{{Node: 1, WRs: []verbs.SendWR{b.write(1, 8, 0)}}}); err != nil {
		t.Fatal(err)
	}
	if got := binary.NativeEndian.Uint64(b.nodes[1].mr.Bytes()[8:]); got != 6 {
		t.Fatalf("m1 holds %d, want 6", got)
	}
}

// TestWorkerPost: a fire-and-forget list goes before the next round's
// lists on the same QP, and its credits come back without a task.
func TestWorkerPost(t *testing.T) {
	b := newRoundBed(t, smart.Config{Limit: 4})
	w := b.rt.Workers()[0]
	binary.NativeEndian.PutUint64(b.buf.Bytes(), 9)
	if err := w.Post(context.Background(), smart.List{Node: 0, WRs: []verbs.SendWR{b.write(0, 128, 0)}}); err != nil {
		t.Fatal(err)
	}
	tk, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Leave()
	if err := tk.DoAll(context.Background(), []smart.List{{Node: 0, WRs: []verbs.SendWR{b.read(0, 128, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if got := binary.NativeEndian.Uint64(b.buf.Bytes()[64:]); got != 9 {
		t.Fatalf("the round read %d, want the posted 9", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st := w.Stats(); st.Credits != st.Limit; st = w.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("%d credits of %d: the posted list's never came back", st.Credits, st.Limit)
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Post(context.Background(), smart.List{Node: 2}); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("a list to no node: %v, want ErrInvalidArg", err)
	}
}
