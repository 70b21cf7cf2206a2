package prism

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

// ReturnRing is how clients give buffers back to a Pool without the
// server's CPU on their path: a ring of 8-byte slots in a server region
// that clients fill by one-sided operations and the server drains.
//
//	offset 0    tail: slots reserved so far (clients FAA it)
//	offset 64   slot[0] … slot[n-1]: 0 when empty, else address | class+1
//
// A client reserves k slots with one FETCH_AND_ADD on tail and fills each
// reserved slot with a CAS from 0 (ReturnWRs builds the list); a CAS that
// finds its slot still occupied — the server a lap behind — is retried by
// the client later. The server's Drain takes filled slots in order, empties
// them and hands the buffers to Pool.Free. Buffers must be at least 64
// bytes (the class lives in the low bits).
//
// A reserved slot may never be filled: its client died between the
// reservation and the fill, or its connection failed, or it found the
// slot occupied and reserved another. Drain passes such a hole once it
// has been reserved for HoleGrace, so that it does not stop every return
// after it for good; a fill that comes later still is drained a lap
// later, when the drain comes round to its slot again.
type ReturnRing struct {
	mr   verbs.MR
	base uint64 // offset of the ring in mr
	n    uint64
	head uint64 // next slot to drain (server side)

	// Every slot below mark was reserved at markAt (passHole).
	mark    uint64
	markAt  time.Time
	skipped atomic.Uint64
	grace   atomic.Int64     // HoleGrace unless set
	now     func() time.Time // time.Now; tests set their own clock
}

// HoleGrace is how long a reserved slot may stay empty before Drain
// passes it: far longer than the round trip between a client's
// reservation and its fill, as long as a segment lock's lease in
// PRISM-KV.
const HoleGrace = time.Second

// ReturnRingSize is the number of bytes a ring of n slots occupies.
func ReturnRingSize(n int) int { return 64 + 8*n }

// NewReturnRing lays a ring of n slots at offset off of mr (zeroed by the
// caller, 8-byte aligned); clients need remote write and atomic access.
func NewReturnRing(mr verbs.MR, off, n int) (*ReturnRing, error) {
	if n <= 0 || off < 0 || off%8 != 0 || off+ReturnRingSize(n) > mr.Len() {
		return nil, fmt.Errorf("%w: a %d-slot ring at %d does not fit the region", verbs.ErrInvalidArg, n, off)
	}
	r := &ReturnRing{mr: mr, base: uint64(off), n: uint64(n), now: time.Now}
	r.grace.Store(int64(HoleGrace))
	return r, nil
}

// Addr is the address of the ring's tail word (clients' ReturnWRs target).
func (r *ReturnRing) Addr() uint64 { return r.mr.Addr() + r.base }

// Slots is the number of slots.
func (r *ReturnRing) Slots() int { return int(r.n) }

func (r *ReturnRing) slot(i uint64) *uint64 {
	b := r.mr.Bytes()[r.base+64+8*(i%r.n):]
	return (*uint64)(unsafe.Pointer(&b[0]))
}

// Drain moves every filled slot, in order, to p.Free and returns how many
// buffers it took, passing holes older than HoleGrace. Call it from one
// goroutine at a time (with Pool.Reclaim, say).
func (r *ReturnRing) Drain(p *Pool) (int, error) {
	n := 0
	for ; ; n++ {
		s := r.slot(r.head)
		v := atomic.LoadUint64(s)
		for v == 0 {
			if !r.passHole() {
				return n, nil
			}
			s = r.slot(r.head)
			v = atomic.LoadUint64(s)
		}
		atomic.StoreUint64(s, 0)
		r.head++
		class := uint32(v&63) - 1
		if err := p.Free(class, v&^63); err != nil {
			return n, fmt.Errorf("prism: return ring slot %d: %w", r.head-1, err)
		}
	}
}

// passHole decides about the empty slot at head: it is a hole when a
// client reserved it (the tail is past it). The first hole marks the tail
// and the time: every slot below the mark was reserved by then, so once
// HoleGrace has passed, those still empty are passed (head moves on,
// true) and the next hole marks again. Holes left together (the dead
// client's whole batch, a few dead clients) cost one grace, not one each.
func (r *ReturnRing) passHole() bool {
	tail := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mr.Bytes()[r.base])))
	if tail <= r.head {
		return false // nothing reserved there: the ring is drained
	}
	now := r.now()
	if r.head >= r.mark {
		r.mark, r.markAt = tail, now
		return false
	}
	if now.Sub(r.markAt) < time.Duration(r.grace.Load()) {
		return false
	}
	r.head++
	r.skipped.Add(1)
	return true
}

// SetHoleGrace replaces HoleGrace for r (safe while it drains). A short
// grace loses nothing: a fill that comes after its hole was passed is
// drained a lap later.
func (r *ReturnRing) SetHoleGrace(d time.Duration) { r.grace.Store(int64(d)) }

// Holes is how many never-filled slots Drain has passed.
func (r *ReturnRing) Holes() uint64 { return r.skipped.Load() }

// ReturnWRs fills the requests that reserve len(items) slots of the
// return ring at ring (rkey's region) — a FETCH_AND_ADD whose result lands
// in tailRes (8 bytes) — and must be followed, once that completes, by
// FillWRs with the reserved index.
func ReturnWRs(wrs []verbs.SendWR, id uint64, rkey uint32, ring uint64, count int, tailRes verbs.SGE) []verbs.SendWR {
	w := &wrs[0]
	sglW := w.SGL[:0] // keep the backing array: no allocation
	*w = verbs.SendWR{ID: id, Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled, RemoteAddr: ring, RKey: rkey}
	w.Atomic.Swap[0] = uint64(count)
	w.SGL = append(sglW, tailRes)
	return wrs[:1]
}

// FillWRs fills one CAS per returned buffer into the slots reserved from
// index first of a ring of slots slots: slot ← address | class+1 if empty.
// res holds 8 bytes per buffer for the CASes' results: a result other
// than 0 means the slot was still occupied and that CAS must be posted
// again later. Only the last is signaled.
func FillWRs(wrs []verbs.SendWR, id uint64, rkey uint32, ring uint64, slots int, first uint64, bufs []Returned, res verbs.SGE) []verbs.SendWR {
	for i, b := range bufs {
		w := &wrs[i]
		sglW := w.SGL[:0] // keep the backing array: no allocation
		*w = verbs.SendWR{ID: id, Opcode: verbs.OpAtomicCmpAndSwp, RKey: rkey,
			RemoteAddr: ring + 64 + 8*((first+uint64(i))%uint64(slots))}
		w.Atomic.Swap[0] = b.Addr | uint64(b.Class+1)
		w.SGL = append(sglW, verbs.SGE{Addr: res.Addr + 8*uint64(i), Length: 8, LKey: res.LKey})
	}
	wrs[len(bufs)-1].Flags |= verbs.FlagSignaled
	return wrs[:len(bufs)]
}

// Returned is a buffer a client gives back: its address and class.
type Returned struct {
	Addr  uint64
	Class uint32
}
