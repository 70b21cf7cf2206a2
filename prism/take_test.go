package prism_test

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestPoolTake: Take carves buffers of the class's size, aligned, never
// one twice nor one the free list holds, until the region is full
// (ErrPoolFull); a taken buffer goes back through Free and Reclaim like
// any other; a class the pool lacks is refused.
func TestPoolTake(t *testing.T) {
	tb := newTestbed(t, 1<<20)
	const size = 4096
	pool, err := prism.NewPool(tb.pool, prism.PoolConfig{MinSize: size, MaxSize: size, Stock: 8, Offset: size})
	if err != nil {
		t.Fatal(err)
	}
	if st := pool.Stats(); st.Carved != 8 {
		t.Fatalf("stocked %d buffers, want 8", st.Carved)
	}
	seen := map[uint64]bool{}
	base, end := tb.pool.Addr(), tb.pool.Addr()+uint64(tb.pool.Len())
	for {
		a, err := pool.Take(0)
		if errors.Is(err, prism.ErrPoolFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// The 8 stocked buffers are the first 8 after the offset.
		if (a-base)%size != 0 || a < base+9*size || a+size > end || seen[a] {
			t.Fatalf("Take = %#x: unaligned, out of the region, a stocked one or twice", a)
		}
		seen[a] = true
	}
	if want := tb.pool.Len()/size - 9; len(seen) != want {
		t.Fatalf("took %d buffers, want %d", len(seen), want)
	}
	var one uint64
	for a := range seen {
		one = a
		break
	}
	if err := pool.Free(0, one); err != nil {
		t.Fatalf("Free of a taken buffer: %v", err)
	}
	if n, err := pool.Reclaim(); n != 1 || err != nil {
		t.Fatalf("Reclaim = %d, %v", n, err)
	}
	if _, err := pool.Take(1); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("Take of a class the pool lacks: %v", err)
	}
}
