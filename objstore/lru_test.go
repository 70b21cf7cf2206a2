package objstore

import (
	"context"
	"errors"
	"testing"
)

// TestEvictionOrder fills a store with released objects, touches one,
// and checks that room is made by evicting the least recently released
// ones first, never a referenced one.
func TestEvictionOrder(t *testing.T) {
	const obj = 64 << 10
	s := newTestStore(t, 8*obj)
	c := connect(t, s)
	ctx := context.Background()
	ids := make([]ID, 8)
	for i := range ids {
		ids[i] = NewID()
		put(t, c, ids[i], obj, nil, byte(i))
	}
	// ids[0] is used again (Get then Release): it becomes the most recent.
	// ids[1] stays referenced: never evicted.
	if _, err := c.Get(ctx, []ID{ids[0]}, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, []ID{ids[1]}, 0); err != nil {
		t.Fatal(err)
	}
	// Two new objects evict ids[2] and ids[3], in that order.
	for i := range 2 {
		put(t, c, NewID(), obj, nil, 9)
		for j, id := range ids {
			has, err := c.Contains(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if want := j > 3 || j < 2 || j > 2+i; has != want {
				t.Fatalf("after %d evictions: object %d present %v, want %v", i+1, j, has, want)
			}
		}
	}
	if st := s.Stats(); st.Evictions != 2 {
		t.Fatalf("Evictions %d, want 2", st.Evictions)
	}
}

func TestStoreFull(t *testing.T) {
	const obj = 64 << 10
	s := newTestStore(t, 4*obj)
	c := connect(t, s)
	ctx := context.Background()
	held := make([]ID, 3)
	for i := range held {
		held[i] = NewID()
		if _, err := c.Create(ctx, held[i], obj, nil); err != nil {
			t.Fatal(err)
		}
	}
	released := NewID()
	put(t, c, released, obj/2, nil, 1)
	// 1.5 objects are free or evictable: a 2-object Create fails without
	// evicting anything.
	if _, err := c.Create(ctx, NewID(), 2*obj, nil); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Create beyond every evictable byte: %v, want ErrStoreFull", err)
	}
	if has, _ := c.Contains(ctx, released); !has {
		t.Fatal("a failed Create evicted an object")
	}
	// One object fits only by evicting the released one.
	if _, err := c.Create(ctx, NewID(), obj, nil); err != nil {
		t.Fatalf("Create after eviction: %v", err)
	}
	if has, _ := c.Contains(ctx, released); has {
		t.Fatal("the released object was not evicted")
	}
	if _, err := c.Create(ctx, NewID(), 1, nil); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Create in a full store: %v, want ErrStoreFull", err)
	}
	// Aborting frees room again.
	if err := c.Abort(ctx, held[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, NewID(), obj, nil); err != nil {
		t.Fatalf("Create after Abort: %v", err)
	}
}

// TestResidentMemory checks that a freed large object gives its pages
// back to the kernel.
func TestResidentMemory(t *testing.T) {
	s := newTestStore(t, 64<<20)
	c := connect(t, s)
	ctx := context.Background()
	before := s.Stats().ResidentBytes
	id := NewID()
	put(t, c, id, 16<<20, nil, 1)
	if r := s.Stats().ResidentBytes; r < before+16<<20 {
		t.Fatalf("resident %d after writing 16 MiB (before %d)", r, before)
	}
	if err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if r := s.Stats().ResidentBytes; r > before+64<<10 {
		t.Fatalf("resident %d after Delete, want about %d", r, before)
	}
}

// TestLRUList checks the intrusive list alone: objects enter when they
// become evictable, in that order, leave when referenced or pinned, and
// its byte count follows.
func TestLRUList(t *testing.T) {
	var q lru
	es := make([]*entry, 4)
	for i := range es {
		es[i] = &entry{id: ID{byte(i)}, sealed: true, alloc: 64 * int64(i+1)}
		q.touch(es[i])
	}
	order := func() []byte {
		var ids []byte
		for e := q.head; e != nil; e = e.next {
			ids = append(ids, e.id[0])
		}
		return ids
	}
	if got := order(); string(got) != "\x00\x01\x02\x03" || q.bytes != 640 || q.len() != 4 {
		t.Fatalf("order %v, bytes %d", got, q.bytes)
	}
	es[0].refs = 1
	q.touch(es[0])
	es[2].pins = 1
	q.touch(es[2])
	if got := order(); string(got) != "\x01\x03" || q.bytes != 128+256 || q.oldest() != es[1] {
		t.Fatalf("after a reference and a pin: order %v, bytes %d", got, q.bytes)
	}
	es[0].refs = 0
	q.touch(es[0]) // released again: now the most recent
	q.touch(es[0]) // touching twice changes nothing
	q.remove(es[3])
	if got := order(); string(got) != "\x01\x00" || q.bytes != 128+64 || q.tail != es[0] {
		t.Fatalf("after release and removal: order %v, bytes %d", got, q.bytes)
	}
}
