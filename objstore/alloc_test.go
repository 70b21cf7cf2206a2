package objstore

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAllocRoundsAndAligns(t *testing.T) {
	a := newAllocator(1 << 12)
	for _, n := range []int64{0, 1, 63, 64, 65, 100} {
		off, ok := a.alloc(n)
		if !ok || off%Alignment != 0 {
			t.Fatalf("alloc(%d) = %d, %v", n, off, ok)
		}
	}
	// 64+64+64+64+128+128 bytes used.
	if a.used != 512 {
		t.Fatalf("used %d, want 512", a.used)
	}
}

func TestAllocBestFitAndCoalesce(t *testing.T) {
	a := newAllocator(10 * 64)
	var offs []int64
	for range 10 {
		off, ok := a.alloc(64)
		if !ok {
			t.Fatal("arena should hold 10 granules")
		}
		offs = append(offs, off)
	}
	if _, ok := a.alloc(1); ok {
		t.Fatal("alloc from a full arena succeeded")
	}
	// Free granules 1-3 (a hole of 3) and 6 (a hole of 1).
	for _, i := range []int{1, 2, 3, 6} {
		a.release(offs[i], 64)
	}
	if len(a.free) != 2 || a.free[0] != (span{64, 192}) {
		t.Fatalf("free list %v, want the 3 granules coalesced", a.free)
	}
	// Best fit: one granule comes from the hole of 1, not the hole of 3.
	if off, _ := a.alloc(64); off != offs[6] {
		t.Fatalf("best fit took %d, want %d", off, offs[6])
	}
	// Fragmentation: 3 granules free, but 4 do not fit.
	if _, ok := a.alloc(4 * 64); ok {
		t.Fatal("4 granules fit in a hole of 3")
	}
	if a.largest() != 192 || a.freeBytes() != 192 {
		t.Fatalf("largest %d free %d, want 192 192", a.largest(), a.freeBytes())
	}
	// Freeing granule 4 merges with the hole before it: 4 granules fit.
	if got := a.release(offs[4], 64); got != (span{64, 256}) {
		t.Fatalf("release merged into %v, want {64 256}", got)
	}
	if off, ok := a.alloc(4 * 64); !ok || off != 64 {
		t.Fatalf("alloc of 4 granules = %d %v", off, ok)
	}
}

// TestAllocRandom checks the allocator against a model under random
// allocations and releases: runs never overlap, never leave the arena,
// and the free list stays sorted, coalesced and consistent with used.
func TestAllocRandom(t *testing.T) {
	const size = 1 << 16
	a := newAllocator(size)
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[int64]int64{} // off → requested size
	for step := range 20000 {
		if len(live) > 0 && rng.IntN(2) == 0 {
			for off, n := range live {
				a.release(off, n)
				delete(live, off)
				break
			}
		} else {
			n := int64(rng.IntN(3000))
			off, ok := a.alloc(n)
			if ok {
				if off < 0 || off+roundUp(n) > size {
					t.Fatalf("step %d: run [%d,+%d) outside the arena", step, off, n)
				}
				live[off] = n
			} else if a.largest() >= roundUp(n) {
				t.Fatalf("step %d: alloc(%d) failed with a free span of %d", step, n, a.largest())
			}
		}
		var used int64
		runs := make([]span, 0, len(live))
		for off, n := range live {
			used += roundUp(n)
			runs = append(runs, span{off, roundUp(n)})
		}
		runs = append(runs, a.free...)
		slices.SortFunc(runs, func(x, y span) int { return int(x.off - y.off) })
		var end int64
		for _, r := range runs {
			if r.off != end {
				t.Fatalf("step %d: gap or overlap at %d (next run at %d)", step, end, r.off)
			}
			end = r.off + r.n
		}
		if end != size || used != a.used {
			t.Fatalf("step %d: runs end at %d, used %d vs %d", step, end, used, a.used)
		}
		for i := 1; i < len(a.free); i++ {
			if a.free[i-1].off+a.free[i-1].n >= a.free[i].off {
				t.Fatalf("step %d: free spans %v and %v not coalesced", step, a.free[i-1], a.free[i])
			}
		}
	}
}
