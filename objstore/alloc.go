package objstore

import "sort"

// Alignment is the alignment, in bytes, of every object's data in the
// arena (a cache line), and the allocator's granule.
const Alignment = 64

// allocator hands out runs of an arena of size bytes: a best-fit free
// list kept sorted by offset, so a freed run merges with free
// neighbours at once (coalescing) and fragmentation stays what the
// workload makes it. Sizes are rounded up to Alignment; an allocation
// of zero bytes still takes one granule, so every object has an offset of
// its own. It is not safe for concurrent use (the store's lock guards it).
type allocator struct {
	size int64
	free []span // sorted by off, never adjacent (adjacent spans merge)
	used int64
}

// span is a run of the arena: off and n are multiples of Alignment.
type span struct{ off, n int64 }

func newAllocator(size int64) *allocator {
	size &^= Alignment - 1
	a := &allocator{size: size}
	if size > 0 {
		a.free = []span{{0, size}}
	}
	return a
}

// roundUp is n rounded up to a whole number of granules (at least one).
func roundUp(n int64) int64 {
	if n <= 0 {
		return Alignment
	}
	return (n + Alignment - 1) &^ (Alignment - 1)
}

// alloc returns the offset of a run of roundUp(n) bytes, taken from the
// smallest free span that holds it (the lowest such on ties), or false
// when no span is large enough.
func (a *allocator) alloc(n int64) (int64, bool) {
	n = roundUp(n)
	best := -1
	for i, s := range a.free {
		if s.n >= n && (best < 0 || s.n < a.free[best].n) {
			best = i
			if s.n == n {
				break
			}
		}
	}
	if best < 0 {
		return 0, false
	}
	s := &a.free[best]
	off := s.off
	if s.n == n {
		a.free = append(a.free[:best], a.free[best+1:]...)
	} else {
		s.off += n
		s.n -= n
	}
	a.used += n
	return off, true
}

// release returns the run at off of roundUp(n) bytes (as alloc gave it)
// and returns the free span it is now part of, merged with its free
// neighbours.
func (a *allocator) release(off, n int64) span {
	n = roundUp(n)
	a.used -= n
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off > off })
	merged := span{off, n}
	// Merge with the span before (ends at off) and after (starts at off+n).
	if i > 0 && a.free[i-1].off+a.free[i-1].n == off {
		i--
		merged.off = a.free[i].off
		merged.n += a.free[i].n
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	if i < len(a.free) && a.free[i].off == merged.off+merged.n {
		merged.n += a.free[i].n
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = merged
	return merged
}

// freeBytes is the number of unallocated bytes.
func (a *allocator) freeBytes() int64 { return a.size - a.used }

// largest is the size of the largest free span: the largest allocation
// that would succeed now.
func (a *allocator) largest() int64 {
	var m int64
	for _, s := range a.free {
		m = max(m, s.n)
	}
	return m
}
