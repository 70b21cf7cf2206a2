package arrowobj

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/rdmakit/rdmakit/objstore"
	"github.com/rdmakit/rdmakit/objstore/object"
)

// memStore is an in-memory Creator and Getter with the store's rules:
// objects are visible only once sealed, an aborted object leaves nothing,
// and references are counted.
type memStore struct {
	mu      sync.Mutex
	data    map[object.ID][]byte
	meta    map[object.ID][]byte
	sealed  map[object.ID]bool
	refs    map[object.ID]int
	shorten int // Create hands out this many bytes fewer than asked
}

func newMemStore() *memStore {
	return &memStore{data: map[object.ID][]byte{}, meta: map[object.ID][]byte{}, sealed: map[object.ID]bool{}, refs: map[object.ID]int{}}
}

func (s *memStore) Create(_ context.Context, id object.ID, size int, metadata []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.data[id]; ok {
		return nil, object.ErrExists
	}
	s.data[id] = make([]byte, size-s.shorten)
	s.meta[id] = append([]byte(nil), metadata...)
	s.refs[id] = 1
	return s.data[id], nil
}

func (s *memStore) Seal(_ context.Context, id object.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.data[id]; !ok {
		return object.ErrNotFound
	}
	s.sealed[id] = true
	return nil
}

func (s *memStore) Abort(_ context.Context, id object.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, id)
	delete(s.meta, id)
	delete(s.refs, id)
	return nil
}

func (s *memStore) Get(_ context.Context, ids []object.ID, _ time.Duration) ([]*objstore.Buffer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*objstore.Buffer, len(ids))
	for i, id := range ids {
		if s.sealed[id] {
			s.refs[id]++
			out[i] = &objstore.Buffer{ID: id, Data: s.data[id], Metadata: s.meta[id]}
		}
	}
	return out, nil
}

func (s *memStore) Release(_ context.Context, id object.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs[id] == 0 {
		return object.ErrNotOwner
	}
	s.refs[id]--
	return nil
}

func TestPutGetRecord(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	rec := sampleRecord(t, 50)
	defer rec.Release()
	id := object.NewID()
	if err := Put(ctx, s, id, rec); err != nil {
		t.Fatal(err)
	}
	got, release, err := GetRecord(ctx, s, id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !array.RecordEqual(got, rec) {
		t.Fatal("record differs after Put and GetRecord")
	}
	if !inside(got.Column(0).Data().Buffers()[1].Bytes(), s.data[id]) {
		t.Fatal("GetRecord's column is not in the object's memory")
	}
	if s.refs[id] != 1 {
		t.Fatalf("%d references while the record is held, want 1", s.refs[id])
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if s.refs[id] != 0 {
		t.Fatalf("%d references after release, want 0", s.refs[id])
	}
	if err := Put(ctx, s, id, rec); !errors.Is(err, object.ErrExists) {
		t.Fatalf("second Put of one ID: %v, want ErrExists", err)
	}
}

// TestPutAbortsOnFailure: a Create that hands out too little memory makes
// Write fail; Put must abort, leaving no object behind.
func TestPutAbortsOnFailure(t *testing.T) {
	s := newMemStore()
	s.shorten = 1
	rec := sampleRecord(t, 5)
	defer rec.Release()
	id := object.NewID()
	if err := Put(context.Background(), s, id, rec); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("Put into a short object: %v, want ErrShortBuffer", err)
	}
	if _, ok := s.data[id]; ok {
		t.Fatal("the failed object was not aborted")
	}
}

func TestGetRecordRejects(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	plain := object.NewID()
	dst, _ := s.Create(ctx, plain, 16, []byte("text"))
	copy(dst, "not arrow at all")
	_ = s.Seal(ctx, plain)
	_ = s.Release(ctx, plain)
	if _, _, err := GetRecord(ctx, s, plain, time.Second); !errors.Is(err, ErrNotArrow) {
		t.Fatalf("GetRecord of a non-Arrow object: %v, want ErrNotArrow", err)
	}

	rec := sampleRecord(t, 5)
	defer rec.Release()
	bad := object.NewID()
	if err := Put(ctx, s, bad, rec); err != nil {
		t.Fatal(err)
	}
	s.data[bad][10] ^= 0xff
	if _, _, err := GetRecord(ctx, s, bad, time.Second); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetRecord of a corrupted object: %v, want ErrCorrupt", err)
	}
	for _, id := range []object.ID{plain, bad} {
		if s.refs[id] != 0 {
			t.Fatalf("a failed GetRecord kept %d references", s.refs[id])
		}
	}
	if _, _, err := GetRecord(ctx, s, object.NewID(), time.Second); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("GetRecord of a missing object: %v, want ErrNotFound", err)
	}
}

// TestWithStore puts a record into a real store and reads it back through
// a second client: the record's columns are in the store's shared memory
// (the second client's mapping), and release drops the reference.
func TestWithStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := objstore.NewStore(objstore.Config{Mem: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- st.Serve(ctx) }()
	defer func() { st.Close(); <-done }()
	writer, err := objstore.Connect(ctx, st.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	reader, err := objstore.Connect(ctx, st.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()

	rec := sampleRecord(t, 300)
	defer rec.Release()
	id := object.NewID()
	if err := Put(ctx, writer, id, rec); err != nil {
		t.Fatal(err)
	}
	got, release, err := GetRecord(ctx, reader, id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !array.RecordEqual(got, rec) {
		t.Fatal("record differs after a trip through the store")
	}
	bufs, err := reader.Get(ctx, []object.ID{id}, 0)
	if err != nil || bufs[0] == nil {
		t.Fatalf("Get: %v %v", bufs, err)
	}
	if !inside(got.Column(3).Data().Buffers()[2].Bytes(), bufs[0].Data) {
		t.Fatal("the string column's bytes are not in the store's memory")
	}
	if err := reader.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := writer.Delete(ctx, id); err != nil {
		t.Fatalf("Delete after release: %v (a reference was left)", err)
	}
	if _, _, err := GetRecord(ctx, reader, id, 0); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("GetRecord of a deleted object: %v, want ErrNotFound", err)
	}
}

// cancellingCreator cancels the put's context right after its Create:
// the put then fails at Seal.
type cancellingCreator struct {
	*objstore.Client
	cancel context.CancelFunc
}

func (c cancellingCreator) Create(ctx context.Context, id object.ID, size int, metadata []byte) ([]byte, error) {
	b, err := c.Client.Create(ctx, id, size, metadata)
	c.cancel()
	return b, err
}

// TestCancelledWithStore cancels a Put between Create and Seal and a
// GetRecord waiting for an object never sealed: both fail with the
// context's error and the store is left with no object, reference or
// waiter.
func TestCancelledWithStore(t *testing.T) {
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	st, err := objstore.NewStore(objstore.Config{Mem: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- st.Serve(ctx) }()
	defer func() { st.Close(); <-done }()
	c, err := objstore.Connect(ctx, st.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := sampleRecord(t, 100)
	defer rec.Release()

	// Either the put is undone (the Seal did not reach the store before
	// the cancellation) or it took effect: never a half-put object.
	putCtx, cancel := context.WithCancel(ctx)
	id := object.NewID()
	switch err := Put(putCtx, cancellingCreator{c, cancel}, id, rec); {
	case errors.Is(err, context.Canceled):
	case err == nil:
		if err := c.Delete(ctx, id); err != nil {
			t.Fatalf("Put that took effect despite the cancellation left a reference: %v", err)
		}
	default:
		t.Fatalf("Put cancelled after Create: %v, want context.Canceled or nil", err)
	}
	getCtx, cancel := context.WithCancel(ctx)
	defer time.AfterFunc(50*time.Millisecond, cancel).Stop()
	if _, _, err := GetRecord(getCtx, c, object.NewID(), -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetRecord of an object never sealed, cancelled: %v, want context.Canceled", err)
	}
	// The store answers the client's calls in order: once a later call
	// returns, the abort and the cancellation have been handled.
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Objects != 0 || s.References != 0 || s.Waiters != 0 || s.BytesAllocated != 0 {
		t.Fatalf("after the cancelled calls the store has %d objects, %d references, %d waiters, %d bytes", s.Objects, s.References, s.Waiters, s.BytesAllocated)
	}
}
