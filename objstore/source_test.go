package objstore

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/objstore/object"
)

func TestSourcePin(t *testing.T) {
	s := newTestStore(t, 2*64<<10)
	c := connect(t, s)
	ctx := context.Background()
	id := NewID()
	put(t, c, id, 100, []byte("md"), 5)
	obj, dataSize, release, err := s.Source().Pin(id)
	if err != nil {
		t.Fatal(err)
	}
	if dataSize != 100 || len(obj) != 102 || string(obj[100:]) != "md" {
		t.Fatalf("Pin = %d bytes, data %d, metadata %q", len(obj), dataSize, obj[100:])
	}
	if err := c.Delete(ctx, id); !errors.Is(err, ErrInUse) {
		t.Fatalf("Delete of a pinned object: %v, want ErrInUse", err)
	}
	// The pinned object is not evicted: a Create needing its room fails.
	if _, err := c.Create(ctx, NewID(), 2*64<<10-64, nil); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Create needing a pinned object's room: %v, want ErrStoreFull", err)
	}
	release()
	release() // a second call does nothing
	if st := s.Stats(); st.Pins != 0 || st.Evictable != 1 {
		t.Fatalf("stats after release %+v", st)
	}
	if _, _, _, err := s.Source().Pin(NewID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Pin of a missing object: %v", err)
	}
	unsealed := NewID()
	if _, err := c.Create(ctx, unsealed, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Source().Pin(unsealed); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Pin of an unsealed object: %v, want ErrNotFound", err)
	}
}

// TestSinkInvisibleUntilCommit checks that an object the transfer layer
// is filling is seen by nobody until commit, and that abort leaves
// nothing.
func TestSinkInvisibleUntilCommit(t *testing.T) {
	s := newTestStore(t, 1<<20)
	c := connect(t, s)
	ctx := context.Background()
	sub, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	id := NewID()
	dst, commit, abort, err := s.Sink().Create(id, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Sink().Create(id, 10, 2); !errors.Is(err, ErrExists) {
		t.Fatalf("second Sink.Create: %v, want ErrExists", err)
	}
	if _, err := c.Create(ctx, id, 10, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("client Create of an ID being fetched: %v, want ErrExists", err)
	}
	copy(dst, "0123456789md")
	if has, _ := c.Contains(ctx, id); has {
		t.Fatal("a half-written object is contained")
	}
	if got, _ := c.Get(ctx, []ID{id}, 0); got[0] != nil {
		t.Fatal("a half-written object is returned by Get")
	}
	abort()
	if err := commit(); err == nil {
		t.Fatal("commit after abort succeeded")
	}
	if st := s.Stats(); st.Objects != before.Objects || st.BytesAllocated != before.BytesAllocated {
		t.Fatalf("abort left %+v (before %+v)", st, before)
	}

	// Commit: a waiting Get wakes, the subscriber hears, nobody holds a
	// reference afterwards.
	dst, commit, _, err = s.Sink().Create(id, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []*Buffer, 1)
	go func() {
		got, _ := c.Get(ctx, []ID{id}, 10*time.Second)
		done <- got
	}()
	waitFor(t, "the Get to wait", func() bool { return s.Stats().Waiters == 1 })
	copy(dst, "0123456789md")
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got[0] == nil || string(got[0].Data) != "0123456789" || string(got[0].Metadata) != "md" {
		t.Fatalf("Get after commit = %+v", got[0])
	}
	if n := <-sub.C(); n != id {
		t.Fatalf("notice %s, want %s", n, id)
	}
	if err := c.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.References != 0 || st.Evictable != 1 {
		t.Fatalf("a committed, released object: %+v", st)
	}
}

func TestSinkConcurrentCreate(t *testing.T) {
	s := newTestStore(t, 1<<20)
	id := NewID()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, exists := 0, 0
	for range 8 {
		wg.Go(func() {
			_, commit, _, err := s.Sink().Create(id, 100, 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
				if err := commit(); err != nil {
					t.Error(err)
				}
			case errors.Is(err, ErrExists):
				exists++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || exists != 7 {
		t.Fatalf("%d creates won, %d saw ErrExists; want 1 and 7", wins, exists)
	}
}

// copyFetcher is a Fetcher that copies objects from another store's
// Source, as the transfer layer does across nodes.
type copyFetcher struct{ from *Store }

func (f copyFetcher) Fetch(ctx context.Context, ids []ID, sink object.Sink) []error {
	errs := make([]error, len(ids))
	for i, id := range ids {
		obj, dataSize, release, err := f.from.Source().Pin(id)
		if err != nil {
			errs[i] = errors.Join(ErrUnavailable, err)
			continue
		}
		dst, commit, _, err := sink.Create(id, dataSize, len(obj)-dataSize)
		if err == nil {
			copy(dst, obj)
			err = commit()
		}
		release()
		if err != nil && !errors.Is(err, ErrExists) {
			errs[i] = err
		}
	}
	return errs
}

func TestFetch(t *testing.T) {
	remote := newTestStore(t, 1<<20)
	rc := connect(t, remote)
	ctx := context.Background()
	id, gone := NewID(), NewID()
	put(t, rc, id, 5000, []byte("meta"), 7)
	want, _ := rc.Get(ctx, []ID{id}, 0)

	local, err := NewStore(Config{Mem: 1 << 20, Fetcher: copyFetcher{remote}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go local.Serve(ctx)
	t.Cleanup(func() { local.Close() })
	c := connect(t, local)
	errs, err := c.Fetch(ctx, []ID{id, gone})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], ErrUnavailable) {
		t.Fatalf("Fetch errors %v, want nil and ErrUnavailable", errs)
	}
	got, err := c.Get(ctx, []ID{id}, 0)
	if err != nil || got[0] == nil || !bytes.Equal(got[0].Data, want[0].Data) || string(got[0].Metadata) != "meta" {
		t.Fatalf("Get after Fetch: %v %v", got, err)
	}
	// Fetching what is present asks nobody.
	errs, err = c.Fetch(ctx, []ID{id})
	if err != nil || errs[0] != nil {
		t.Fatalf("Fetch of a present object: %v %v", errs, err)
	}

	// A store without a Fetcher.
	plain := newTestStore(t, 1<<20)
	errs, err = connect(t, plain).Fetch(ctx, []ID{id})
	if err != nil || !errors.Is(errs[0], ErrUnavailable) {
		t.Fatalf("Fetch without a Fetcher: %v %v", errs, err)
	}
}
