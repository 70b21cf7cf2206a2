package transfer

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// TestSizes fetches objects of the edge sizes by every protocol and
// checks every byte (SHA-256), the protocol the hybrid chose, the copy
// accounting, and that nothing stays pinned or registered.
func TestSizes(t *testing.T) {
	const th = 8 << 10
	cfg := Config{Threshold: th, Slots: 4, SlotSize: 4096}
	payload := cfg.SlotSize - chunkHdrLen
	sizes := []int{0, 1, 4095, 4096, 4097, th - 1, th, th + 1, 3*payload + 7, 3<<20 + 5}
	for _, transport := range []string{"loop", "tcp"} {
		r := newRig(t, transport, cfg)
		var ids []object.ID
		for i, n := range sizes {
			meta := min(n, i*3) // some metadata, never more than the object
			ids = append(ids, r.src.add(n-meta, meta))
		}
		for _, p := range Protocols() {
			if transport == "tcp" && !p.Verbs() {
				continue // the TCP baselines do not use the device
			}
			t.Run(fmt.Sprintf("%s/%v", transport, p), func(t *testing.T) {
				f := r.fetcher(t, p)
				sink := newMemSink()
				held := r.srv.Stats()
				errs := f.Fetch(testCtx(t), ids, sink)
				for i, err := range errs {
					if err != nil {
						t.Fatalf("size %d: %v", sizes[i], err)
					}
					got, ok := sink.sum(ids[i])
					if !ok || got != r.src.sum(ids[i]) {
						t.Fatalf("size %d: fetched object differs (present %v)", sizes[i], ok)
					}
				}
				st := f.Stats()
				var reads, total int64
				for i, n := range sizes {
					total += int64(n)
					if n > 0 && (p == Read || p == Hybrid && n >= th) {
						reads++
					}
					if sz := sink.sizes[ids[i]]; sz[0]+sz[1] != n {
						t.Errorf("size %d created as %v", n, sz)
					}
				}
				if st.Bytes != total {
					t.Errorf("Bytes %d, want %d", st.Bytes, total)
				}
				if p.Verbs() {
					if st.Transfers[Read] != reads || st.Transfers[SendRecv] != int64(len(sizes))-reads {
						t.Errorf("transfers %v, want %d by READ", st.Transfers, reads)
					}
				} else if st.Transfers[p] != int64(len(sizes)) {
					t.Errorf("transfers %v, want %d by %v", st.Transfers, len(sizes), p)
				}
				var copied int64
				for _, n := range sizes {
					if p.Verbs() && !(n > 0 && (p == Read || p == Hybrid && n >= th)) {
						copied += int64(n)
					}
				}
				if st.CopiedBytes != copied {
					t.Errorf("fetcher copied %d bytes, want %d", st.CopiedBytes, copied)
				}
				if n := r.srv.Stats().CopiedBytes - held.CopiedBytes; n != copied {
					t.Errorf("holder copied %d bytes, want %d", n, copied)
				}
				if sink.creates.Load() != int64(len(sizes)) || sink.commits.Load() != int64(len(sizes)) || sink.aborts.Load() != 0 {
					t.Errorf("sink: %d creates %d commits %d aborts", sink.creates.Load(), sink.commits.Load(), sink.aborts.Load())
				}
				eventually(t, "nothing pinned or registered", func() bool {
					return r.src.pins.Load() == 0 && r.srv.Stats().Registrations == 0 && f.Stats().Registrations == 0
				})
			})
		}
	}
}

// TestPairReuse: a second fetch over the same fetcher creates no pair
// and allocates no buffers.
func TestPairReuse(t *testing.T) {
	r := newRig(t, "loop", Config{})
	f := r.fetcher(t, Hybrid)
	sink := newMemSink()
	a, b := r.src.add(100, 0), r.src.add(1<<20, 0)
	if err := f.Fetch(testCtx(t), []object.ID{a}, sink)[0]; err != nil {
		t.Fatal(err)
	}
	first := f.Stats()
	if first.Pairs != 1 || first.BufferBytes == 0 {
		t.Fatalf("after the first fetch: %d pairs, %d buffer bytes", first.Pairs, first.BufferBytes)
	}
	if err := f.Fetch(testCtx(t), []object.ID{b}, sink)[0]; err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Pairs != 1 || st.BufferBytes != first.BufferBytes {
		t.Fatalf("the second fetch made a pair or buffers: %d pairs, %d buffer bytes", st.Pairs, st.BufferBytes)
	}
	if st := r.srv.Stats(); st.Pairs != 1 {
		t.Fatalf("server accepted %d pairs", st.Pairs)
	}
}

// TestConcurrentSameID: concurrent fetches of one ID create it once, and
// a fetch of an object already present succeeds without a transfer.
func TestConcurrentSameID(t *testing.T) {
	r := newRig(t, "loop", Config{})
	for _, p := range []Protocol{SendRecv, Read, TCPBulk} {
		t.Run(p.String(), func(t *testing.T) {
			f := r.fetcher(t, p)
			sink := newMemSink()
			id := r.src.add(256<<10, 10)
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = f.Fetch(testCtx(t), []object.ID{id, id}, sink)[0]
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if sink.commits.Load() != 1 || sink.aborts.Load() != 0 {
				t.Fatalf("%d commits, %d aborts; want the object created once", sink.commits.Load(), sink.aborts.Load())
			}
			if got, _ := sink.sum(id); got != r.src.sum(id) {
				t.Fatal("fetched object differs")
			}
			if err := f.Fetch(testCtx(t), []object.ID{id}, sink)[0]; err != nil {
				t.Fatalf("fetch of a present object: %v", err)
			}
		})
	}
}

// TestNotFound: an ID no peer has fails with ErrUnavailable (and
// ErrNotFound inside); the store-full sink's error comes back as is.
func TestNotFound(t *testing.T) {
	r := newRig(t, "loop", Config{})
	for _, p := range []Protocol{Hybrid, TCP4K} {
		f := r.fetcher(t, p)
		err := f.Fetch(testCtx(t), []object.ID{object.NewID()}, newMemSink())[0]
		if !errors.Is(err, object.ErrUnavailable) || !errors.Is(err, object.ErrNotFound) {
			t.Fatalf("%v: missing object: %v", p, err)
		}
		sink := newMemSink()
		sink.full = true
		err = f.Fetch(testCtx(t), []object.ID{r.src.add(50<<10, 0)}, sink)[0]
		if !errors.Is(err, object.ErrStoreFull) {
			t.Fatalf("%v: full sink: %v", p, err)
		}
		// The pair survives both.
		if err := f.Fetch(testCtx(t), []object.ID{r.src.add(5, 0)}, newMemSink())[0]; err != nil {
			t.Fatal(err)
		}
		if st := f.Stats(); st.PairsClosed != 0 {
			t.Fatalf("%v: %d pairs closed", p, st.PairsClosed)
		}
	}
	eventually(t, "no pins", func() bool { return r.src.pins.Load() == 0 && r.srv.Stats().Registrations == 0 })
}
