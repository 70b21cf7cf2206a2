package ring

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
	"golang.org/x/sys/cpu"
)

// Layout constants; see the package documentation.
const (
	// HeaderSize is the number of bytes of the ring header; the data area
	// follows it.
	HeaderSize = 640
	// MinCapacity is the smallest data area: 64 bytes, messages of up to
	// 24 bytes.
	MinCapacity = 64
	// MaxCapacity is the largest data area: 1 GiB.
	MaxCapacity = 1 << 30
	// Magic identifies a ring header: "ring" in little-endian byte order.
	Magic = 0x676e6972
	// Version is the layout version this package writes and accepts.
	Version = 1

	offMagic     = 0
	offVersion   = 4
	offCapacity  = 8
	offHeaderLen = 16
	offTail      = 128
	offHead      = 256
	offDataWait  = 384
	offSpaceWait = 512

	recHeader = 8 // bytes of a record header
	kindMsg   = 0 // record kinds
	kindSkip  = 1
)

var (
	// ErrEmpty is returned by Peek when no message is waiting.
	ErrEmpty = errors.New("ring: empty")
	// ErrFull is returned by Reserve and Write when the message does not
	// fit in the free space now.
	ErrFull = errors.New("ring: full")
	// ErrTooLarge is returned by Reserve, Write and WaitSpace for a
	// message longer than MaxMessage (or of negative length): it could
	// never fit.
	ErrTooLarge = errors.New("ring: message too large")
	// ErrCorrupt is matched (errors.Is) by the errors of Attach for a
	// header that is not a valid ring, and by the errors of the producer
	// or consumer side once the peer has written something inconsistent
	// (an index out of range, a malformed record). Once a side returns
	// it, that side keeps returning the same error.
	ErrCorrupt = errors.New("ring: corrupt")
	// ErrVersion is matched by the error of Attach for a ring of another
	// layout version.
	ErrVersion = errors.New("ring: unsupported version")
	// ErrPeerDead is returned by Wait and WaitSpace when the liveness
	// callback reports the peer dead and the ring has nothing for the
	// caller.
	ErrPeerDead = errors.New("ring: peer dead")
)

// Ring is one process's handle on a ring in shared memory. It has a
// producer side (Reserve, Commit, Write, WaitSpace) and a consumer side
// (Peek, Release, Wait). Each side must be used by one goroutine at a time
// and by one handle only, in any process; the two sides may run
// concurrently, whether through one Ring or through two Rings attached to
// the same memory. The accessors (Capacity, MaxMessage) are safe anywhere.
//
// The memory must stay mapped for as long as the Ring is used.
type Ring struct {
	data     []byte // the data area, len == capacity
	capacity uint64
	mask     uint64
	maxMsg   int

	tailW     *uint64 // shared words
	headW     *uint64
	dataWait  *uint32
	spaceWait *uint32

	_ cpu.CacheLinePad
	// Producer side.
	tail     uint64 // committed tail: this side's own, published in *tailW
	headSeen uint64 // last validated head read from *headW
	reserved uint64 // bytes of the pending reservation (skip + record), 0 if none
	errProd  error  // sticky corruption error
	_        cpu.CacheLinePad
	// Consumer side.
	head     uint64 // released head: this side's own, published in *headW
	tailSeen uint64 // last validated tail read from *tailW
	peeked   uint64 // bytes of the peeked message (skip + record), 0 if none
	errCons  error  // sticky corruption error
	_        cpu.CacheLinePad
}

// Size returns the number of bytes of memory a ring with a data area of
// capacity bytes occupies: HeaderSize + capacity. capacity should be a
// power of two between MinCapacity and MaxCapacity.
func Size(capacity int) int { return HeaderSize + capacity }

// recSize is the size of the record of an n-byte message.
func recSize(n int) uint64 { return (uint64(n) + recHeader + 7) &^ 7 }

// Init formats b as an empty ring and returns a handle on it. The data area
// is the largest power of two that fits after the header, at most
// MaxCapacity; b must be 8-byte aligned and hold at least
// Size(MinCapacity) bytes. Init overwrites the header, so it must run
// before the memory is shared with the peer (who then calls Attach).
func Init(b []byte) (*Ring, error) {
	if _, err := shmem.Uint64At(b); err != nil {
		return nil, fmt.Errorf("ring: init: %w", err)
	}
	if len(b) < Size(MinCapacity) {
		return nil, fmt.Errorf("ring: init: %d bytes, need at least %d", len(b), Size(MinCapacity))
	}
	capacity := uint64(1) << (bits.Len64(uint64(len(b)-HeaderSize)) - 1)
	capacity = min(capacity, MaxCapacity)
	clear(b[:HeaderSize])
	*word32(b, offVersion) = Version
	*word64(b, offCapacity) = capacity
	*word64(b, offHeaderLen) = HeaderSize
	// The magic last: a header with the magic is complete.
	atomic.StoreUint32(word32(b, offMagic), Magic)
	return newRing(b, capacity, 0, 0), nil
}

// Attach returns a handle on the ring that the peer formatted in b with
// Init, after validating the header: magic, version, a power-of-two
// capacity that fits in b, and indices that are aligned and at most a
// capacity apart. Errors match ErrCorrupt (ErrVersion for a version
// mismatch) and say what is wrong. A ring already in use may be attached;
// each side resumes from the index it finds.
func Attach(b []byte) (*Ring, error) {
	if _, err := shmem.Uint64At(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if len(b) < Size(MinCapacity) {
		return nil, fmt.Errorf("%w: %d bytes, a ring needs at least %d", ErrCorrupt, len(b), Size(MinCapacity))
	}
	if m := atomic.LoadUint32(word32(b, offMagic)); m != Magic {
		return nil, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, m)
	}
	if v := atomic.LoadUint32(word32(b, offVersion)); v != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrVersion, v, Version)
	}
	if h := atomic.LoadUint64(word64(b, offHeaderLen)); h != HeaderSize {
		return nil, fmt.Errorf("%w: header size %d, want %d", ErrCorrupt, h, HeaderSize)
	}
	capacity := atomic.LoadUint64(word64(b, offCapacity))
	switch {
	case capacity < MinCapacity || capacity > MaxCapacity || capacity&(capacity-1) != 0:
		return nil, fmt.Errorf("%w: capacity %d is not a power of two in [%d, %d]",
			ErrCorrupt, capacity, MinCapacity, MaxCapacity)
	case capacity > uint64(len(b)-HeaderSize):
		return nil, fmt.Errorf("%w: capacity %d exceeds the %d bytes after the header",
			ErrCorrupt, capacity, len(b)-HeaderSize)
	}
	tail := atomic.LoadUint64(word64(b, offTail))
	head := atomic.LoadUint64(word64(b, offHead))
	if tail%8 != 0 || head%8 != 0 || tail-head > capacity {
		return nil, fmt.Errorf("%w: indices head %d, tail %d inconsistent with capacity %d",
			ErrCorrupt, head, tail, capacity)
	}
	return newRing(b, capacity, head, tail), nil
}

func newRing(b []byte, capacity, head, tail uint64) *Ring {
	return &Ring{
		data:      b[HeaderSize : HeaderSize+capacity : HeaderSize+capacity],
		capacity:  capacity,
		mask:      capacity - 1,
		maxMsg:    int(capacity/2 - recHeader),
		tailW:     word64(b, offTail),
		headW:     word64(b, offHead),
		dataWait:  word32(b, offDataWait),
		spaceWait: word32(b, offSpaceWait),
		tail:      tail,
		headSeen:  head,
		head:      head,
		tailSeen:  tail,
	}
}

// word32 and word64 return pointers to aligned words of the header; the
// callers have checked the length and the alignment of b.
func word32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
func word64(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

// recordAt returns a pointer to the record header at data offset pos, a
// multiple of 8 below the capacity.
func (r *Ring) recordAt(pos uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.data[pos]))
}

// Capacity returns the size of the data area in bytes.
func (r *Ring) Capacity() int { return int(r.capacity) }

// MaxMessage returns the largest message length the ring accepts:
// Capacity()/2 - 8, so that a record never takes more than half the ring.
func (r *Ring) MaxMessage() int { return r.maxMsg }

// ---- Producer side ----

// need returns the number of bytes a message of n bytes takes at the
// current tail: its record, plus a skip record if it would wrap.
func (r *Ring) need(n int) uint64 {
	rec := recSize(n)
	pos := r.tail & r.mask
	if pos+rec > r.capacity {
		return r.capacity - pos + rec
	}
	return rec
}

// loadHead reads and validates the consumer's head.
func (r *Ring) loadHead() error {
	h := atomic.LoadUint64(r.headW)
	if h%8 != 0 || r.tail-h > r.capacity {
		r.errProd = fmt.Errorf("%w: head %d with tail %d and capacity %d", ErrCorrupt, h, r.tail, r.capacity)
		return r.errProd
	}
	r.headSeen = h
	return nil
}

// fits reports whether need more bytes fit now, reading the consumer's
// head if the last one seen is not enough.
func (r *Ring) fits(need uint64) (bool, error) {
	if r.tail-r.headSeen+need <= r.capacity {
		return true, nil
	}
	if err := r.loadHead(); err != nil {
		return false, err
	}
	return r.tail-r.headSeen+need <= r.capacity, nil
}

// Fits reports whether a message of n bytes would fit now (Reserve(n)
// would succeed). It is a producer-side call.
func (r *Ring) Fits(n int) (bool, error) {
	if r.errProd != nil {
		return false, r.errProd
	}
	if n < 0 || n > r.maxMsg {
		return false, ErrTooLarge
	}
	return r.fits(r.need(n))
}

// Reserve reserves room for a message of n bytes and returns the n-byte
// slice of the ring to fill; Commit publishes it. It never waits: when the
// message does not fit now it returns ErrFull (see WaitSpace). It returns
// ErrTooLarge when n exceeds MaxMessage or is negative, and an error
// matching ErrCorrupt when the consumer's index is out of range. Another
// Reserve before Commit abandons the pending reservation, whether it
// succeeds or not. The slice is valid
// until Commit; the consumer sees nothing of it before.
func (r *Ring) Reserve(n int) ([]byte, error) {
	r.reserved = 0
	if r.errProd != nil {
		return nil, r.errProd
	}
	if n < 0 || n > r.maxMsg {
		return nil, ErrTooLarge
	}
	need := r.need(n)
	if ok, err := r.fits(need); !ok {
		if err != nil {
			return nil, err
		}
		return nil, ErrFull
	}
	pos := r.tail & r.mask
	if rec := recSize(n); need != rec {
		// Pad to the end of the data area; the message starts at 0.
		*r.recordAt(pos) = (need-rec)&0xffffffff | kindSkip<<32
		pos = 0
	}
	*r.recordAt(pos) = uint64(n) | kindMsg<<32
	r.reserved = need
	p := pos + recHeader
	return r.data[p : p+uint64(n) : p+uint64(n)], nil
}

// CommitEnd is the ring position just past the message the last Reserve
// reserved: what Committed will be once it is committed (Committed when
// nothing is reserved). A producer that tracks its messages records it
// before Commit, so that no answer to the message can come first.
func (r *Ring) CommitEnd() uint64 { return r.tail + r.reserved }

// Commit publishes the message reserved by the last Reserve, waking the
// consumer if it is parked. Without a pending reservation it does
// nothing.
func (r *Ring) Commit() {
	if r.reserved == 0 {
		return
	}
	r.tail += r.reserved
	r.reserved = 0
	atomic.StoreUint64(r.tailW, r.tail) // release: the record is written
	wakeIfParked(r.dataWait)
}

// Write copies p into the ring as one message and publishes it: Reserve,
// copy and Commit, with Reserve's errors.
func (r *Ring) Write(p []byte) error {
	b, err := r.Reserve(len(p))
	if err != nil {
		return err
	}
	copy(b, p)
	r.Commit()
	return nil
}

// wakeIfParked wakes the peer parked on the futex word w, if it is. The
// load keeps the common case (nobody parked) to a read of a cache line
// that stays shared.
func wakeIfParked(w *uint32) {
	if atomic.LoadUint32(w) != 0 && atomic.SwapUint32(w, 0) != 0 {
		_, _ = shmem.Wake(w, 1)
	}
}

// ---- Consumer side ----

// loadTail reads and validates the producer's tail.
func (r *Ring) loadTail() error {
	t := atomic.LoadUint64(r.tailW) // acquire: records below t are written
	if t%8 != 0 || t-r.head > r.capacity {
		r.errCons = fmt.Errorf("%w: tail %d with head %d and capacity %d", ErrCorrupt, t, r.head, r.capacity)
		return r.errCons
	}
	r.tailSeen = t
	return nil
}

// corrupt records and returns a consumer-side corruption error.
func (r *Ring) corrupt(what string, pos, w uint64) error {
	r.errCons = fmt.Errorf("%w: %s at data offset %d (header %#x, head %d, tail %d)",
		ErrCorrupt, what, pos, w, r.head, r.tailSeen)
	return r.errCons
}

// Committed returns the producer's tail: the ring position just past the
// last committed message. It is a producer-side call.
func (r *Ring) Committed() uint64 { return r.tail }

// Released returns the consumer's published head: every message that ends
// at or below it has been consumed. Any goroutine may call it; the value
// is the peer's word, so treat it as a claim.
func (r *Ring) Released() uint64 { return atomic.LoadUint64(r.headW) }

// Pending reports whether the producer has committed bytes the consumer
// has not released: a hint, safe to call from any goroutine (it reads only
// the shared indices), for skipping an empty ring without taking the
// consumer's lock.
func (r *Ring) Pending() bool {
	return atomic.LoadUint64(r.tailW) != atomic.LoadUint64(r.headW)
}

// Peek returns the oldest message without consuming it: a slice into the
// ring, valid until Release. Peeking again before Release returns the same
// message. It returns ErrEmpty when there is none, and an error matching
// ErrCorrupt when the producer's index or the record is malformed. The
// payload is shared memory: see the package documentation on trust.
func (r *Ring) Peek() ([]byte, error) {
	if r.errCons != nil {
		return nil, r.errCons
	}
	if r.tailSeen == r.head {
		if err := r.loadTail(); err != nil {
			return nil, err
		}
		if r.tailSeen == r.head {
			return nil, ErrEmpty
		}
	}
	avail := r.tailSeen - r.head // in (0, capacity], a multiple of 8
	pos := r.head & r.mask
	w := atomic.LoadUint64(r.recordAt(pos)) // read the header once
	var skip uint64
	if w>>32 == kindSkip {
		skip = w & 0xffffffff
		if pos == 0 || skip != r.capacity-pos || skip >= avail {
			return nil, r.corrupt("bad skip record", pos, w)
		}
		avail -= skip
		pos = 0
		w = atomic.LoadUint64(r.recordAt(0))
	}
	n := w & 0xffffffff
	if w>>32 != kindMsg || n > uint64(r.maxMsg) {
		return nil, r.corrupt("bad record header", pos, w)
	}
	rec := recSize(int(n))
	if rec > avail || pos+rec > r.capacity {
		return nil, r.corrupt("record beyond the committed bytes", pos, w)
	}
	r.peeked = skip + rec
	p := pos + recHeader
	return r.data[p : p+n : p+n], nil
}

// Release consumes the message returned by the last Peek, handing its
// bytes back to the producer (and waking it if it waits for space). The
// slice Peek returned must not be used afterwards. Without a peeked
// message Release does nothing.
func (r *Ring) Release() {
	if r.peeked == 0 {
		return
	}
	r.head += r.peeked
	r.peeked = 0
	atomic.StoreUint64(r.headW, r.head) // release: our reads are done
	wakeIfParked(r.spaceWait)
}
