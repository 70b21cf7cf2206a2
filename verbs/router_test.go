package verbs

import (
	"errors"
	"sync"
	"testing"
)

func TestTagID(t *testing.T) {
	for _, c := range []struct {
		tag Tag
		low uint64
	}{{1, 0}, {7, 12345}, {MaxTags, LowMask}, {3, 1<<63 | 5}} {
		id := c.tag.ID(c.low)
		if TagOf(id) != c.tag || id&LowMask != c.low&LowMask {
			t.Errorf("Tag(%d).ID(%#x) = %#x: tag %d, low %#x", c.tag, c.low, id, TagOf(id), id&LowMask)
		}
	}
}

// TestRouterRoutes sends completions of three tags, an untagged one and
// one of a tag never registered through one Dispatch: each handler sees
// its own, in order, with every status (flushes, skips) and its low bits;
// the others are counted as dropped.
func TestRouterRoutes(t *testing.T) {
	var r Router
	got := map[Tag][]WC{}
	var tags []Tag
	for i := 0; i < 3; i++ {
		var tag Tag
		tag, err := r.Register(func(wc *WC) error {
			got[tag] = append(got[tag], *wc)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	if tags[0] == 0 || tags[0] == tags[1] || tags[1] == tags[2] {
		t.Fatalf("tags %v: want distinct and non-zero", tags)
	}
	wcs := []WC{
		{ID: tags[0].ID(1)},
		{ID: tags[1].ID(2), Status: StatusWRFlushErr},
		{ID: 42}, // untagged
		{ID: tags[2].ID(3), Status: StatusSkipped},
		{ID: tags[0].ID(4), Opcode: WCRecv},
		{ID: Tag(200).ID(5)}, // never registered
	}
	if n, err := r.Dispatch(wcs); n != len(wcs) || err != nil {
		t.Fatalf("Dispatch = %d, %v", n, err)
	}
	want := map[Tag][]WC{tags[0]: {wcs[0], wcs[4]}, tags[1]: {wcs[1]}, tags[2]: {wcs[3]}}
	for tag, w := range want {
		if len(got[tag]) != len(w) {
			t.Errorf("tag %d got %v, want %v", tag, got[tag], w)
			continue
		}
		for i := range w {
			if got[tag][i] != w[i] {
				t.Errorf("tag %d completion %d = %+v, want %+v", tag, i, got[tag][i], w[i])
			}
		}
	}
	if r.Dropped() != 2 {
		t.Errorf("Dropped = %d, want 2", r.Dropped())
	}
	r.Unregister(tags[1])
	if _, err := r.Dispatch(wcs[1:2]); err != nil || len(got[tags[1]]) != 1 || r.Dropped() != 3 {
		t.Errorf("after Unregister: %v, %d delivered, %d dropped", err, len(got[tags[1]]), r.Dropped())
	}
}

// TestRouterHandlerError: a handler's error stops the dispatch at its
// completion; the rest are left to the caller.
func TestRouterHandlerError(t *testing.T) {
	var r Router
	boom := errors.New("boom")
	calls := 0
	tag, _ := r.Register(func(wc *WC) error {
		calls++
		if wc.Status != StatusSuccess {
			return boom
		}
		return nil
	})
	wcs := []WC{{ID: tag.ID(0)}, {ID: tag.ID(1), Status: StatusRemAccessErr}, {ID: tag.ID(2)}}
	n, err := r.Dispatch(wcs)
	if n != 2 || !errors.Is(err, boom) || calls != 2 {
		t.Errorf("Dispatch = %d, %v after %d calls; want 2, boom, 2", n, err, calls)
	}
}

func TestRouterFull(t *testing.T) {
	var r Router
	if _, err := r.Register(nil); !errors.Is(err, ErrInvalidArg) {
		t.Errorf("Register(nil): %v", err)
	}
	nop := func(*WC) error { return nil }
	seen := map[Tag]bool{}
	for i := 0; i < MaxTags; i++ {
		tag, err := r.Register(nop)
		if err != nil || tag == 0 || seen[tag] {
			t.Fatalf("registration %d: tag %d, %v", i, tag, err)
		}
		seen[tag] = true
	}
	if _, err := r.Register(nop); !errors.Is(err, ErrRouterFull) {
		t.Fatalf("registration %d: %v, want ErrRouterFull", MaxTags+1, err)
	}
	r.Unregister(9)
	if tag, err := r.Register(nop); tag != 9 || err != nil {
		t.Errorf("after freeing tag 9: tag %d, %v", tag, err)
	}
}

// TestRouterReuseLast: a tag just freed is handed out only after every
// other free tag.
func TestRouterReuseLast(t *testing.T) {
	var r Router
	nop := func(*WC) error { return nil }
	a, _ := r.Register(nop)
	r.Unregister(a)
	for i := 0; i < MaxTags-1; i++ {
		if tag, _ := r.Register(nop); tag == a {
			t.Fatalf("tag %d reused after %d registrations", a, i)
		}
	}
	if tag, _ := r.Register(nop); tag != a {
		t.Errorf("last free tag: %d, want %d", tag, a)
	}
}

// TestRouterConcurrent dispatches on several goroutines while handlers
// come and go (run it with -race): every completion of a registered tag
// arrives exactly once.
func TestRouterConcurrent(t *testing.T) {
	var r Router
	var mu sync.Mutex
	count := 0
	tag, _ := r.Register(func(*WC) error { mu.Lock(); count++; mu.Unlock(); return nil })
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]WC, 16)
			for i := range wcs {
				wcs[i].ID = tag.ID(uint64(i))
			}
			for i := 0; i < 200; i++ {
				r.Dispatch(wcs)
			}
		}()
	}
	for i := 0; i < 200; i++ {
		other, err := r.Register(func(*WC) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		r.Unregister(other)
	}
	wg.Wait()
	if count != 4*200*16 {
		t.Errorf("%d completions delivered, want %d", count, 4*200*16)
	}
}

// TestRouterDispatchAllocs guards the dispatch path: routing, dropping
// and stopping allocate nothing.
func TestRouterDispatchAllocs(t *testing.T) {
	var r Router
	var sum uint64
	stop := errors.New("stop")
	tag, _ := r.Register(func(wc *WC) error {
		sum += wc.ID & LowMask
		if wc.Status != StatusSuccess {
			return stop
		}
		return nil
	})
	wcs := make([]WC, 32)
	for i := range wcs {
		wcs[i].ID = tag.ID(uint64(i))
	}
	wcs[5].ID = 7 // dropped
	wcs[31].Status = StatusWRFlushErr
	if a := testing.AllocsPerRun(1000, func() { r.Dispatch(wcs) }); a != 0 {
		t.Errorf("Dispatch allocates %.1f times per call", a)
	}
}

func BenchmarkRouterDispatch(b *testing.B) {
	var r Router
	var sum uint64
	tag, _ := r.Register(func(wc *WC) error { sum += wc.ID; return nil })
	wcs := make([]WC, 16)
	for i := range wcs {
		wcs[i].ID = tag.ID(uint64(i))
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Dispatch(wcs)
	}
}
