package transfer

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// TestPeersInOrder: a fetch asks the peers in order until one has the
// object, and asks the one where it found an ID first next time.
func TestPeersInOrder(t *testing.T) {
	a := newRig(t, "loop", Config{})
	// A second holder on the same fabric, with objects of its own.
	hb, err := a.fabric.Open("holder-b")
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	srcB := newMemSource()
	srvB, err := NewServer(testCtx(t), srcB, hb, "127.0.0.1:0", "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srvB.Close()
	onlyB := srcB.add(70<<10, 2)
	f, err := NewFetcher(Config{Device: a.fdev, Peers: []string{a.srv.VerbsAddr(), srvB.VerbsAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sink := newMemSink()
	if err := f.Fetch(testCtx(t), []object.ID{onlyB}, sink)[0]; err != nil {
		t.Fatal(err)
	}
	if got, _ := sink.sum(onlyB); got != srcB.sum(onlyB) {
		t.Fatal("fetched object differs")
	}
	if n := a.srv.Stats().NotFound; n != 1 {
		t.Fatalf("the first peer was asked %d times, want once", n)
	}
	// Where it was found is asked first now.
	if err := f.Fetch(testCtx(t), []object.ID{onlyB}, newMemSink())[0]; err != nil {
		t.Fatal(err)
	}
	if n := a.srv.Stats().NotFound; n != 1 {
		t.Fatalf("the first peer was asked again (%d NOT_FOUNDs)", n)
	}
}

// TestReadInPieces: a device whose messages are smaller than the object
// READs it in several pieces.
func TestReadInPieces(t *testing.T) {
	r := newRig(t, "loop", Config{})
	f := r.fetcher(t, Read)
	fp, err := f.pairFor(testCtx(t), r.srv.VerbsAddr())
	if err != nil {
		t.Fatal(err)
	}
	fp.maxMsg = 4096
	id := r.src.add(100_000, 123)
	sink := newMemSink()
	if _, _, err := fp.fetch(testCtx(t), id, sink, Read, 0); err != nil {
		t.Fatal(err)
	}
	if n := sink.commits.Load(); n != 1 {
		t.Fatalf("%d commits", n)
	}
	if n := fp.readsPosted.Load(); n != 25 {
		t.Fatalf("%d READs posted for 100,123 bytes in pieces of 4096, want 25", n)
	}
	if got, _ := sink.sum(id); got != r.src.sum(id) {
		t.Fatal("object READ in pieces differs")
	}
}

// TestWindowMismatch: a fetcher whose window differs from the holder's
// cannot connect a pair (ErrProtocol), and nothing is left behind.
func TestWindowMismatch(t *testing.T) {
	r := newRig(t, "loop", Config{Slots: 4, SlotSize: 4096})
	f, err := NewFetcher(Config{Slots: 8, SlotSize: 4096, Device: r.fdev, Peers: []string{r.srv.VerbsAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = f.Fetch(testCtx(t), []object.ID{r.src.add(10, 0)}, newMemSink())[0]
	if !errors.Is(err, object.ErrProtocol) || !errors.Is(err, object.ErrUnavailable) {
		t.Fatalf("fetch with a mismatched window: %v, want ErrProtocol", err)
	}
	if st := f.Stats(); st.Pairs != 0 {
		t.Fatalf("%d pairs made", st.Pairs)
	}
}
