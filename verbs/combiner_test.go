package verbs

import (
	"errors"
	"sync"
	"testing"
)

// TestCombiner submits from many goroutines: every request is posted
// exactly once, in batches, and a failed batch reaches Fail whole.
func TestCombiner(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	batches := 0
	c := &Combiner{Yield: true, Post: func(b []SendWR) error {
		mu.Lock()
		defer mu.Unlock()
		batches++
		for _, w := range b {
			seen[w.ID]++
		}
		return nil
	}}
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := uint64(g*each + i)
				c.Submit(SendWR{ID: 2 * id}, SendWR{ID: 2*id + 1})
			}
		}(g)
	}
	wg.Wait()
	if len(seen) != 2*goroutines*each {
		t.Fatalf("%d distinct requests posted, want %d", len(seen), 2*goroutines*each)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("request %d posted %d times", id, n)
		}
	}
	if batches >= goroutines*each {
		t.Errorf("%d batches for %d submissions: nothing was combined", batches, goroutines*each)
	}

	boom := errors.New("boom")
	var failed []SendWR
	c = &Combiner{Post: func([]SendWR) error { return boom }, Fail: func(b []SendWR, err error) {
		if !errors.Is(err, boom) {
			t.Errorf("Fail got %v", err)
		}
		failed = append(failed, b...)
	}}
	c.Submit(SendWR{ID: 7}, SendWR{ID: 8})
	if len(failed) != 2 || failed[0].ID != 7 || failed[1].ID != 8 {
		t.Fatalf("Fail saw %v, want the batch [7 8]", failed)
	}
}
