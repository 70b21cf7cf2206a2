package transfer

import (
	"context"
	"testing"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// oneSource and oneSink hold one object each and allocate nothing per
// call, so the test below measures the transfer alone.
type oneSource struct {
	obj     []byte
	release func()
}

func (s *oneSource) Pin(object.ID) ([]byte, int, func(), error) {
	return s.obj, len(s.obj), s.release, nil
}

type oneSink struct {
	dst     []byte
	commit  func() error
	abort   func()
	commits int
}

func (s *oneSink) Create(object.ID, int, int) ([]byte, func() error, func(), error) {
	return s.dst, s.commit, s.abort, nil
}

// TestSendRecvAllocs: a SEND/RECV transfer over a warm pair allocates
// nothing, holder side included.
func TestSendRecvAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need a quiet process")
	}
	cfg := Config{Slots: 8, SlotSize: 4096}
	r := newRig(t, "loop", cfg)
	src := &oneSource{obj: make([]byte, 10000), release: func() {}}
	for i := range src.obj {
		src.obj[i] = byte(i)
	}
	r.srv.src = src
	sink := &oneSink{dst: make([]byte, len(src.obj))}
	sink.commit = func() error { sink.commits++; return nil }
	sink.abort = func() {}
	f := r.fetcher(t, SendRecv)
	ctx := context.Background()
	fp, err := f.pairFor(ctx, r.srv.VerbsAddr())
	if err != nil {
		t.Fatal(err)
	}
	id := object.NewID()
	run := func() {
		if _, _, err := fp.fetch(ctx, id, sink, SendRecv, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		run() // warm the pools, the maps and the goroutines' stacks
	}
	allocs := testing.AllocsPerRun(200, run)
	if allocs > 0.5 {
		t.Fatalf("%.2f allocations per SEND/RECV transfer, want none", allocs)
	}
	// AllocsPerRun runs once more to warm up: 50 + 1 + 200.
	if sink.dst[9999] != src.obj[9999] || sink.commits != 251 {
		t.Fatalf("the transfers did not land: %d commits", sink.commits)
	}
}
