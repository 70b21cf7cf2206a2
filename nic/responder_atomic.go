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

// AtomicLocks serialises the atomics executed on a node's memory. A
// stripe is chosen by address bits above the 32-byte granule (StripeOf):
// atomics are at most 32 bytes and aligned to their size, so any two
// atomics whose bytes overlap fall in the same granule and take the same
// lock, whatever their sizes. Every executor of atomics on a node's memory
// must use the node's locks; by default they are a table of mutexes in the
// node's process (Config.Locks replaces them, e.g. with locks in shared
// memory that initiators in other processes take).
type AtomicLocks interface {
	// Lock locks stripe s.
	Lock(s uint32)
	// Unlock unlocks stripe s.
	Unlock(s uint32)
	// Journal is called, with stripe s locked, just before a 16- or
	// 32-byte atomic stores new words over the n words at addr under
	// rkey, whose values were orig: an implementation whose lock outlives
	// a dead holder restores them for the next owner, so that an atomic is
	// never left half-applied. The table in the node's process does
	// nothing.
	Journal(s uint32, rkey uint32, addr uint64, orig *[4]uint64, n int)
}

// StripeOf is the lock stripe of an atomic at addr.
func StripeOf(addr uint64) uint32 { return uint32((addr >> 5) % LockStripes) }

// lockTable is the default AtomicLocks: a mutex per stripe.
type lockTable struct {
	stripes [LockStripes]struct {
		sync.Mutex
		_ [64 - unsafe.Sizeof(sync.Mutex{})]byte
	}
}

func (t *lockTable) lock(addr uint64) *sync.Mutex {
	return &t.stripes[StripeOf(addr)].Mutex
}

// Lock implements AtomicLocks.
func (t *lockTable) Lock(s uint32) { t.stripes[s].Lock() }

// Unlock implements AtomicLocks.
func (t *lockTable) Unlock(s uint32) { t.stripes[s].Unlock() }

// Journal implements AtomicLocks: a mutex dies with its process.
func (t *lockTable) Journal(uint32, uint32, uint64, *[4]uint64, int) {}

// word returns the 8-byte word at b[0:8] for atomic access; b must be
// 8-byte aligned.
func word(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }

// execAtomic runs an atomic operation on the bytes of memory mem (at
// remoteAddr under rkey; its size, aligned, checked by the caller) under
// the locks l and writes the original value into orig. It reports whether
// a compare-and-swap swapped.
func execAtomic(l AtomicLocks, op verbs.Opcode, a *verbs.AtomicArgs, rkey uint32, remoteAddr uint64, mem []byte, orig *[4]uint64) bool {
	s := StripeOf(remoteAddr)
	l.Lock(s)
	ok := applyAtomic(l, s, op, a, rkey, remoteAddr, mem, orig)
	l.Unlock(s)
	return ok
}

// applyAtomic is execAtomic's work with stripe s held.
func applyAtomic(l AtomicLocks, s uint32, op verbs.Opcode, a *verbs.AtomicArgs, rkey uint32, remoteAddr uint64, mem []byte, orig *[4]uint64) bool {
	switch op {
	case verbs.OpAtomicCmpAndSwp:
		p := word(mem)
		v := atomic.LoadUint64(p)
		orig[0] = v
		if v == a.Compare[0] {
			// Under the stripe lock, whose release orders it: a plain
			// store on amd64 (storeRel) where an atomic store would
			// add a locked instruction. Direct READs load the word
			// atomically and see the old or the new value.
			storeRel(p, a.Swap[0])
			return true
		}
		return false
	case verbs.OpAtomicFetchAndAdd:
		p := word(mem)
		v := atomic.LoadUint64(p)
		orig[0] = v
		storeRel(p, v+a.Swap[0]) // as CAS's
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
		if n > 1 {
			l.Journal(s, rkey, remoteAddr, &cur, n)
		}
		for i := 0; i < n; i++ {
			nv := cur[i]&^a.SwapMask[i] | a.Swap[i]&a.SwapMask[i]
			if nv != cur[i] {
				atomic.StoreUint64(word(mem[8*i:]), nv)
			}
		}
		return true
	case verbs.OpMaskedFetchAndAdd:
		if n > 1 {
			l.Journal(s, rkey, remoteAddr, &cur, n)
		}
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
