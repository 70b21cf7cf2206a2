package smart_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestEnterGather runs FETCH_AND_ADDs from tasks that callers start with
// Enter and end with Leave, on workers that gather concurrent posts:
// every add lands, and an ended task is reused.
func TestEnterGather(t *testing.T) {
	fabric := fmt.Sprintf("smart%d", fabricSeq.Add(1))
	node := newMemoryNode(t, fabric, "mem")
	dev, pd, buf := newClient(t, fabric)
	rt, err := smart.New(context.Background(), smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{node.connect(dev)},
		Workers: 2, Gather: true, Throttle: true, Backoff: smart.BackoffConfig{Tasks: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	const callers, adds = 16, 200
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := rt.Workers()[i%2]
			res := verbs.SGE{Addr: buf.Addr() + uint64(8*i), Length: 8, LKey: buf.LKey()}
			for k := 0; k < adds; k++ {
				tk, err := w.Enter(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				err = tk.FAA(0, res, node.mr.Addr(), node.mr.RKey(), 1)
				tk.Leave()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	if got := binary.NativeEndian.Uint64(node.mr.Bytes()); got != callers*adds {
		t.Fatalf("counter %d, want %d", got, callers*adds)
	}
	w := rt.Workers()[0]
	a, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a.Leave()
	b, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave()
	if a != b {
		t.Errorf("Enter after Leave made a new task instead of reusing the idle one")
	}
}

// TestLeaveWaitsForAbandonedList ends a task whose Do gave up on its
// context: Leave returns once the list completed, and the reused task's
// next Do sees its own completion, not the old one.
func TestLeaveWaitsForAbandonedList(t *testing.T) {
	fabric := fmt.Sprintf("smart%d", fabricSeq.Add(1))
	node := newMemoryNode(t, fabric, "mem")
	dev, pd, buf := newClient(t, fabric)
	rt, err := smart.New(context.Background(), smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{node.connect(dev)}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	w := rt.Workers()[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Do posts, then finds its context ended
	tk, err := w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tk.Leave()
	tk, err = w.Enter(ctx)
	if err == nil { // Enter may refuse at once for an ended context
		res := verbs.SGE{Addr: buf.Addr(), Length: 8, LKey: buf.LKey()}
		if err := tk.FAA(0, res, node.mr.Addr(), node.mr.RKey(), 1); err == nil {
			t.Log("the add completed before Do looked at its context")
		}
		tk.Leave() // waits for the add
	}
	tk, err = w.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Leave()
	res := verbs.SGE{Addr: buf.Addr() + 8, Length: 8, LKey: buf.LKey()}
	binary.NativeEndian.PutUint64(node.mr.Bytes()[64:], 41)
	if err := tk.FAA(0, res, node.mr.Addr()+64, node.mr.RKey(), 1); err != nil {
		t.Fatal(err)
	}
	if got := binary.NativeEndian.Uint64(buf.Bytes()[8:]); got != 41 {
		t.Fatalf("FETCH_AND_ADD fetched %d, want 41", got)
	}
}
