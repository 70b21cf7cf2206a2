package nic

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

// LockStripes is the number of locks in a node's atomics lock table, as in
// Connect-IB.
const LockStripes = 4096

// lockTable serialises atomics. A stripe is chosen by address bits above
// the 32-byte granule: atomics are at most 32 bytes and aligned to their
// size, so any two atomics whose bytes overlap fall in the same granule and
// take the same lock, whatever their sizes.
type lockTable struct {
	stripes [LockStripes]struct {
		sync.Mutex
		_ [64 - unsafe.Sizeof(sync.Mutex{})]byte
	}
}

func (t *lockTable) lock(addr uint64) *sync.Mutex {
	return &t.stripes[(addr>>5)%LockStripes].Mutex
}

// word returns the 8-byte word at b[0:8] for atomic access; b must be
// 8-byte aligned.
func word(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }

// execAtomic runs an atomic operation on the bytes of remote memory mem
// (its size, aligned, checked by the caller) and writes the original
// value into orig. It reports whether a compare-and-swap swapped.
func (t *lockTable) execAtomic(op verbs.Opcode, a *verbs.AtomicArgs, remoteAddr uint64, mem []byte, orig *[4]uint64) bool {
	mu := t.lock(remoteAddr)
	mu.Lock()
	defer mu.Unlock()
	switch op {
	case verbs.OpAtomicCmpAndSwp:
		p := word(mem)
		v := atomic.LoadUint64(p)
		orig[0] = v
		if v == a.Compare[0] {
			atomic.StoreUint64(p, a.Swap[0])
			return true
		}
		return false
	case verbs.OpAtomicFetchAndAdd:
		p := word(mem)
		v := atomic.LoadUint64(p)
		orig[0] = v
		atomic.StoreUint64(p, v+a.Swap[0])
		return true
	}
	n := int(a.Size / 8)
	var cur [4]uint64
	for i := 0; i < n; i++ {
		cur[i] = atomic.LoadUint64(word(mem[8*i:]))
	}
	*orig = cur
	switch op {
	case verbs.OpMaskedCmpAndSwp:
		if !compare(&cur, a, n) {
			return false
		}
		for i := 0; i < n; i++ {
			nv := cur[i]&^a.SwapMask[i] | a.Swap[i]&a.SwapMask[i]
			if nv != cur[i] {
				atomic.StoreUint64(word(mem[8*i:]), nv)
			}
		}
		return true
	case verbs.OpMaskedFetchAndAdd:
		for i := 0; i < n; i++ {
			atomic.StoreUint64(word(mem[8*i:]), fieldAdd(cur[i], a.Swap[i], a.SwapMask[i]))
		}
		return true
	}
	return false
}

// compare evaluates (cur & mask) op (compare & mask) over n words, word 0
// most significant.
func compare(cur *[4]uint64, a *verbs.AtomicArgs, n int) bool {
	c := 0
	for i := 0; i < n; i++ {
		x, y := cur[i]&a.CompareMask[i], a.Compare[i]&a.CompareMask[i]
		if x != y {
			if x < y {
				c = -1
			} else {
				c = 1
			}
			break
		}
	}
	switch a.Op {
	case verbs.CmpEqual:
		return c == 0
	case verbs.CmpNotEqual:
		return c != 0
	case verbs.CmpLess:
		return c < 0
	case verbs.CmpLessEqual:
		return c <= 0
	case verbs.CmpGreater:
		return c > 0
	case verbs.CmpGreaterEqual:
		return c >= 0
	}
	return false
}

// fieldAdd adds y to x as independent fields: a set bit i of boundary ends
// a field at bit i, so the carry out of bit i is dropped.
func fieldAdd(x, y, boundary uint64) uint64 {
	if boundary == 0 {
		return x + y
	}
	var out uint64
	lo := 0
	for boundary != 0 {
		hi := bits.TrailingZeros64(boundary) // field is bits lo..hi
		boundary &= boundary - 1
		if hi < lo {
			continue
		}
		width := hi - lo + 1
		mask := ^uint64(0)
		if width < 64 {
			mask = (uint64(1) << width) - 1
		}
		f := ((x >> lo) + (y >> lo)) & mask
		out |= f << lo
		lo = hi + 1
	}
	if lo < 64 {
		out |= ((x >> lo) + (y >> lo)) << lo
	}
	return out
}
