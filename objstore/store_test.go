package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"runtime/debug"
	"testing"
	"time"
)

// newTestStore starts a store of mem bytes serving until the test ends.
func newTestStore(t testing.TB, mem int64) *Store {
	t.Helper()
	s, err := NewStore(Config{Mem: mem, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.Close()
	})
	return s
}

// testLogger logs to the test's output (shown when it fails or with -v).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// connect connects a client to s, closed when the test ends.
func connect(t testing.TB, s *Store) *Client {
	t.Helper()
	return connectTo(t, s.Addr())
}

// connectTo connects a client to the store at socket, closed when the
// test ends.
func connectTo(t testing.TB, socket string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCreateSealGet(t *testing.T) {
	s := newTestStore(t, 1<<20)
	c := connect(t, s)
	ctx := context.Background()
	id := NewID()
	buf, err := c.Create(ctx, id, 5, []byte("meta"))
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "hello")
	if err := c.Seal(ctx, id); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, []ID{id}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == nil || !bytes.Equal(got[0].Data, []byte("hello")) || !bytes.Equal(got[0].Metadata, []byte("meta")) {
		t.Fatalf("Get = %+v", got[0])
	}
	if _, err := c.Create(ctx, id, 1, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate Create: %v, want ErrExists", err)
	}
}

// put creates, fills (with a pattern derived from seed), seals and
// releases an object of size bytes and returns its checksum.
func put(t testing.TB, c *Client, id ID, size int, meta []byte, seed byte) uint32 {
	t.Helper()
	ctx := context.Background()
	buf, err := c.Create(ctx, id, size, meta)
	if err != nil {
		t.Fatalf("Create %d bytes: %v", size, err)
	}
	for i := range buf {
		buf[i] = byte(i*7) + seed
	}
	sum := crc32.ChecksumIEEE(buf)
	if err := c.Seal(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestSizesWithChecksums(t *testing.T) {
	s := newTestStore(t, 64<<20)
	writer, reader := connect(t, s), connect(t, s)
	ctx := context.Background()
	for _, size := range []int{0, 1, 4095, 4096, 4097, 3<<20 + 5} {
		id := NewID()
		meta := []byte(fmt.Sprintf("size=%d", size))
		sum := put(t, writer, id, size, meta, byte(size))
		got, err := reader.Get(ctx, []ID{id}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b := got[0]
		if b == nil || len(b.Data) != size || crc32.ChecksumIEEE(b.Data) != sum || string(b.Metadata) != string(meta) {
			t.Fatalf("size %d: got %d bytes, checksum mismatch or metadata %q", size, len(b.Data), b.Metadata)
		}
		if err := reader.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Objects != 6 || st.Sealed != 6 || st.References != 0 || st.Evictable != 6 {
		t.Fatalf("stats %+v", st)
	}
}

func TestErrors(t *testing.T) {
	s, err := NewStore(Config{Mem: 1 << 20, MaxObjectSize: 1 << 16, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background())
	t.Cleanup(func() { s.Close() })
	a, b := connect(t, s), connect(t, s)
	ctx := context.Background()
	id := NewID()
	for _, size := range []int{-1, 1<<16 + 1} {
		if _, err := a.Create(ctx, id, size, nil); !errors.Is(err, ErrBadSize) {
			t.Errorf("Create size %d: %v, want ErrBadSize", size, err)
		}
	}
	if _, err := a.Create(ctx, id, 1<<16-1, []byte("xy")); !errors.Is(err, ErrBadSize) {
		t.Errorf("Create with data plus metadata over the limit: %v, want ErrBadSize", err)
	}
	if _, err := a.Create(ctx, id, 1, make([]byte, MaxMetadataSize+1)); !errors.Is(err, ErrBadSize) {
		t.Errorf("Create with metadata too big: %v, want ErrBadSize", err)
	}
	if _, err := a.Create(ctx, id, 10, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, id, 10, nil); !errors.Is(err, ErrExists) {
		t.Errorf("Create by another client: %v, want ErrExists", err)
	}
	if err := b.Seal(ctx, id); !errors.Is(err, ErrNotOwner) {
		t.Errorf("Seal by a non-creator: %v, want ErrNotOwner", err)
	}
	if err := b.Abort(ctx, id); !errors.Is(err, ErrNotOwner) {
		t.Errorf("Abort by a non-creator: %v, want ErrNotOwner", err)
	}
	if ok, _ := b.Contains(ctx, id); ok {
		t.Error("an unsealed object is contained")
	}
	if err := a.Delete(ctx, id); !errors.Is(err, ErrInUse) {
		t.Errorf("Delete of an unsealed object: %v, want ErrInUse", err)
	}
	if err := a.Seal(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := a.Seal(ctx, id); !errors.Is(err, ErrSealed) {
		t.Errorf("second Seal: %v, want ErrSealed", err)
	}
	if err := a.Abort(ctx, id); !errors.Is(err, ErrSealed) {
		t.Errorf("Abort of a sealed object: %v, want ErrSealed", err)
	}
	if err := b.Release(ctx, id); !errors.Is(err, ErrNotOwner) {
		t.Errorf("Release without a reference: %v, want ErrNotOwner", err)
	}
	if err := b.Delete(ctx, id); !errors.Is(err, ErrInUse) {
		t.Errorf("Delete while the creator references it: %v, want ErrInUse", err)
	}
	if err := a.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, id, NewID()); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInUse) {
		t.Errorf("Delete of one object and a missing one: %v, want only ErrNotFound", err)
	}
	if ok, _ := b.Contains(ctx, id); ok {
		t.Error("a deleted object is contained")
	}
	got, err := b.Get(ctx, []ID{id}, 10*time.Millisecond)
	if err != nil || got[0] != nil {
		t.Errorf("Get of a deleted object: %v %v, want a nil entry", got, err)
	}
	if err := b.Release(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Release of a deleted object: %v, want ErrNotFound", err)
	}
	if st := s.Stats(); st.Objects != 0 || st.BytesAllocated != 0 || st.References != 0 {
		t.Fatalf("stats after all: %+v", st)
	}
}

func TestReferenceCounts(t *testing.T) {
	s := newTestStore(t, 1<<20)
	a, b := connect(t, s), connect(t, s)
	ctx := context.Background()
	id := NewID()
	put(t, a, id, 100, nil, 1)
	for range 2 {
		if got, err := b.Get(ctx, []ID{id, id}, 0); err != nil || got[0] == nil || got[1] == nil {
			t.Fatalf("Get: %v %v", got, err)
		}
	}
	list, err := a.List(ctx)
	if err != nil || len(list) != 1 || list[0].RefCount != 4 || !list[0].Sealed || list[0].DataSize != 100 {
		t.Fatalf("List = %+v, %v; want one sealed object with 4 references", list, err)
	}
	for i := range 4 {
		if err := b.Delete(ctx, id); !errors.Is(err, ErrInUse) {
			t.Fatalf("Delete with %d references: %v", 4-i, err)
		}
		if err := b.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Release(ctx, id); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a fifth Release: %v, want ErrNotOwner", err)
	}
	if err := b.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestGetWaitsForSeal(t *testing.T) {
	s := newTestStore(t, 1<<20)
	a, b := connect(t, s), connect(t, s)
	ctx := context.Background()
	id1, id2 := NewID(), NewID()
	type result struct {
		bufs []*Buffer
		err  error
	}
	done := make(chan result, 1)
	go func() {
		bufs, err := b.Get(ctx, []ID{id1, id2}, -1)
		done <- result{bufs, err}
	}()
	waitFor(t, "the Get to wait", func() bool { return s.Stats().Waiters == 1 })
	put(t, a, id1, 10, nil, 1)
	select {
	case <-done:
		t.Fatal("Get returned with one of two objects sealed")
	case <-time.After(20 * time.Millisecond):
	}
	put(t, a, id2, 20, nil, 2)
	r := <-done
	if r.err != nil || r.bufs[0] == nil || r.bufs[1] == nil || len(r.bufs[1].Data) != 20 {
		t.Fatalf("Get = %+v, %v", r.bufs, r.err)
	}
	if st := s.Stats(); st.Waiters != 0 || st.References != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestGetTimeout(t *testing.T) {
	s := newTestStore(t, 1<<20)
	c := connect(t, s)
	ctx := context.Background()
	have, missing := NewID(), NewID()
	put(t, c, have, 1, nil, 1)
	start := time.Now()
	got, err := c.Get(ctx, []ID{have, missing}, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatalf("Get returned after %v, before its timeout", time.Since(start))
	}
	if got[0] == nil || got[1] != nil {
		t.Fatalf("Get = %v, want the sealed object and a nil entry", got)
	}
	if st := s.Stats(); st.Waiters != 0 || st.References != 1 {
		t.Fatalf("stats %+v, want no waiter and the one reference", st)
	}
}

// TestGetViewIsReadOnly writes to a Get view: the mapping is PROT_READ,
// so the write faults (a panic, with SetPanicOnFault).
func TestGetViewIsReadOnly(t *testing.T) {
	s := newTestStore(t, 1<<20)
	c := connect(t, s)
	id := NewID()
	put(t, c, id, 4096, nil, 3)
	got, err := c.Get(context.Background(), []ID{id}, 0)
	if err != nil || got[0] == nil {
		t.Fatal(got, err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	faulted := func() (faulted bool) {
		defer func() { faulted = recover() != nil }()
		got[0].Data[0] = 1
		return false
	}()
	if !faulted {
		t.Fatal("a write to a Get view did not fault")
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
