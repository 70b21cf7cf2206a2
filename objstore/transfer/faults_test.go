package transfer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// faultCfg detects dead peers quickly.
var faultCfg = Config{Slots: 4, SlotSize: 4096, ProbeInterval: 10 * time.Millisecond, FinTimeout: 2 * time.Second}

// TestHolderKilled kills the holder's node (SEND/RECV) or closes its
// device (READ) while objects are on their way (right after the fetcher
// created them): Fetch fails with
// ErrUnavailable, the created objects are aborted, the holder's pins go.
func TestHolderKilled(t *testing.T) {
	for _, p := range []Protocol{SendRecv, Read} {
		t.Run(p.String(), func(t *testing.T) {
			r := newRig(t, "loop", faultCfg)
			f := r.fetcher(t, p)
			sink := newMemSink()
			sink.onCreate = func(object.ID) { _ = r.fabric.Kill("holder") }
			if p == Read {
				// The other way to lose a holder: its device closes.
				sink.onCreate = func(object.ID) { _ = r.hdev.Close() }
			}
			id := r.src.add(2<<20, 3)
			err := f.Fetch(testCtx(t), []object.ID{id}, sink)[0]
			if !errors.Is(err, object.ErrUnavailable) {
				t.Fatalf("fetch from a killed holder: %v, want ErrUnavailable", err)
			}
			if sink.creates.Load() != 1 || sink.aborts.Load() != 1 || sink.commits.Load() != 0 {
				t.Fatalf("sink: %d creates, %d commits, %d aborts", sink.creates.Load(), sink.commits.Load(), sink.aborts.Load())
			}
			if _, ok := sink.sum(id); ok {
				t.Fatal("a half-fetched object is visible")
			}
			if st := f.Stats(); st.PairsClosed != 1 || st.Registrations != 0 || st.Failed != 1 {
				t.Fatalf("fetcher stats %+v", st)
			}
			eventually(t, "the holder's pins released", func() bool { return r.src.pins.Load() == 0 })
		})
	}
}

// TestPartitionThenReconnect cuts the link mid-transfer: the fetch fails,
// the pair is dropped on both sides, and after the link heals a later
// fetch dials a new pair and succeeds.
func TestPartitionThenReconnect(t *testing.T) {
	for _, p := range []Protocol{SendRecv, Read} {
		t.Run(p.String(), func(t *testing.T) {
			r := newRig(t, "loop", faultCfg)
			f := r.fetcher(t, p)
			sink := newMemSink()
			sink.onCreate = func(object.ID) { _ = r.fabric.Partition("holder", "fetcher") }
			id := r.src.add(1<<20, 0)
			if err := f.Fetch(testCtx(t), []object.ID{id}, sink)[0]; !errors.Is(err, object.ErrUnavailable) {
				t.Fatalf("fetch across a partition: %v", err)
			}
			eventually(t, "the holder drops the pair and its pins", func() bool {
				return r.srv.Stats().PairsClosed == 1 && r.src.pins.Load() == 0 && r.srv.Stats().Registrations == 0
			})
			if err := r.fabric.Heal("holder", "fetcher"); err != nil {
				t.Fatal(err)
			}
			sink.onCreate = nil
			if err := f.Fetch(testCtx(t), []object.ID{id}, sink)[0]; err != nil {
				t.Fatalf("fetch after healing: %v", err)
			}
			if got, _ := sink.sum(id); got != r.src.sum(id) {
				t.Fatal("fetched object differs")
			}
			if st := f.Stats(); st.Pairs != 2 || sink.aborts.Load() != 1 || sink.commits.Load() != 1 {
				t.Fatalf("%d pairs, %d aborts, %d commits", st.Pairs, sink.aborts.Load(), sink.commits.Load())
			}
		})
	}
}

// TestCancel cancels fetches at different points — as the holder pins,
// as the fetcher creates, and after delays that land in the middle of the
// chunks or the READ — by every protocol. Each fetch either succeeds or
// fails with context.Canceled and aborts its object; nothing stays pinned
// or registered, and the pair keeps working.
func TestCancel(t *testing.T) {
	for _, p := range Protocols() {
		t.Run(p.String(), func(t *testing.T) {
			r := newRig(t, "loop", faultCfg)
			f := r.fetcher(t, p)
			sink := newMemSink()
			points := []string{"pin", "create", "0", "50us", "300us", "2ms"}
			for _, point := range points {
				id := r.src.add(3<<20, 100)
				ctx, cancel := context.WithCancel(testCtx(t))
				r.src.onPin, sink.onCreate = nil, nil
				switch point {
				case "pin":
					r.src.onPin = func(object.ID) { cancel(); time.Sleep(time.Millisecond) }
				case "create":
					sink.onCreate = func(object.ID) { cancel() }
				default:
					d, _ := time.ParseDuration(point)
					time.AfterFunc(d, cancel)
				}
				err := f.Fetch(ctx, []object.ID{id}, sink)[0]
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled at %s: %v", point, err)
				}
				_, present := sink.sum(id)
				if (err == nil) != present {
					t.Fatalf("cancelled at %s: err %v but present %v", point, err, present)
				}
				eventually(t, "transfers settled at "+point, func() bool {
					return sink.settled() && r.src.pins.Load() == 0 &&
						r.srv.Stats().Registrations == 0 && f.Stats().Registrations == 0
				})
				if st := f.Stats(); st.PairsClosed != 0 {
					t.Fatalf("cancelled at %s (err %v): the pair closed", point, err)
				}
			}
			r.src.onPin, sink.onCreate = nil, nil
			id := r.src.add(100<<10, 0)
			if err := f.Fetch(testCtx(t), []object.ID{id}, sink)[0]; err != nil {
				t.Fatalf("fetch after the cancellations: %v", err)
			}
			if st := f.Stats(); st.PairsClosed != 0 || (p.Verbs() && st.Pairs != 1) {
				t.Fatalf("cancellations cost pairs: %+v", st)
			}
			if sink.aborts.Load() == 0 {
				t.Log("no cancellation landed mid-transfer") // the pin and create points always do
			}
		})
	}
}

// TestManyConcurrent runs many transfers of mixed sizes at once over a
// pair with the smallest window, so credits run out in both directions
// all the time.
func TestManyConcurrent(t *testing.T) {
	r := newRig(t, "loop", Config{Slots: MinSlots, SlotSize: MinSlotSize, Threshold: 2000, Concurrency: 32, Workers: 3})
	f := r.fetcher(t, Hybrid)
	var ids []object.ID
	for i := 0; i < 200; i++ {
		ids = append(ids, r.src.add(i*37%5000, i%3))
	}
	sink := newMemSink()
	for i, err := range f.Fetch(testCtx(t), ids, sink) {
		if err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
		if got, _ := sink.sum(ids[i]); got != r.src.sum(ids[i]) {
			t.Fatalf("object %d differs", i)
		}
	}
	if st := f.Stats(); st.Transfers[Read] == 0 || st.Transfers[SendRecv] == 0 {
		t.Fatalf("transfers %v: want both protocols", st.Transfers)
	}
}

// TestHolderClosed: a Server closed under transfers ends them
// (ErrUnavailable at the fetcher) and lets go of everything.
func TestHolderClosed(t *testing.T) {
	r := newRig(t, "loop", faultCfg)
	f := r.fetcher(t, Read)
	sink := newMemSink()
	sink.onCreate = func(object.ID) { go r.srv.Close() }
	err := f.Fetch(testCtx(t), []object.ID{r.src.add(1<<20, 0)}, sink)[0]
	if err != nil && !errors.Is(err, object.ErrUnavailable) {
		t.Fatalf("fetch from a closing server: %v", err)
	}
	eventually(t, "everything released", func() bool {
		st := r.srv.Stats()
		return sink.settled() && r.src.pins.Load() == 0 && st.Registrations == 0 && st.PairsClosed == 1
	})
}
