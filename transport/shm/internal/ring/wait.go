package ring

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// Tuning of Wait and WaitSpace.
const (
	// spinBurst is the number of checks between two runtime.Gosched
	// calls (and clock reads) while spinning.
	spinBurst = 16
	// liveSlice bounds one futex sleep when a liveness callback is
	// given, and is the interval between two calls of the callback.
	liveSlice = time.Millisecond
	// idleSlice bounds one futex sleep without a liveness callback, so
	// that a wake-up lost to a misbehaving peer costs at most this long.
	idleSlice = 50 * time.Millisecond
)

// Wait waits until the consumer side has something to look at: it returns
// nil when Peek would return a message (at once if one is already
// waiting, including one peeked and not yet released).
//
// It first spins for up to spin, checking the ring and calling
// runtime.Gosched every few checks, then parks on the futex until the
// producer commits. It returns ctx.Err() as soon as ctx ends, an error
// matching ErrCorrupt if the producer's index is out of range, and
// ErrPeerDead when alive, if not nil, reports the peer dead while the ring
// is empty. alive is called about every millisecond while Wait is
// parked, starting a millisecond after it parks (not while it spins); it
// should be cheap, e.g. shmem.ProcessID.Alive. Without alive and with a
// context that never ends, Wait waits as long as the ring stays empty.
func (r *Ring) Wait(ctx context.Context, spin time.Duration, alive func() bool) error {
	return r.wait(ctx, spin, alive, r.dataWait, false, 0)
}

// WaitSpace waits until a message of n bytes fits, so that Reserve(n)
// would succeed. It spins, parks and reports errors like Wait, with the
// roles reversed: the consumer's Release wakes it; ErrPeerDead means the
// consumer died with the ring too full for the message. It returns
// ErrTooLarge at once if n exceeds MaxMessage.
func (r *Ring) WaitSpace(ctx context.Context, n int, spin time.Duration, alive func() bool) error {
	if n < 0 || n > r.maxMsg {
		return ErrTooLarge
	}
	return r.wait(ctx, spin, alive, r.spaceWait, true, n)
}

// ready reports whether the condition the caller waits for holds: a
// message to read, or (space) room for an n-byte message. Corruption is
// reported as ready with the error.
func (r *Ring) ready(space bool, n int) (bool, error) {
	if space {
		if r.errProd != nil {
			return true, r.errProd
		}
		ok, err := r.fits(r.need(n))
		return ok || err != nil, err
	}
	if r.errCons != nil {
		return true, r.errCons
	}
	if r.tailSeen != r.head {
		return true, nil
	}
	if err := r.loadTail(); err != nil {
		return true, err
	}
	return r.tailSeen != r.head, nil
}

func (r *Ring) wait(ctx context.Context, spin time.Duration, alive func() bool, word *uint32, space bool, n int) error {
	if ok, err := r.ready(space, n); ok {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if spin > 0 {
		start := time.Now()
		for i := 1; ; i++ {
			if ok, err := r.ready(space, n); ok {
				return err
			}
			if i%spinBurst == 0 {
				runtime.Gosched()
				if time.Since(start) >= spin {
					break
				}
			}
		}
	}
	return r.park(ctx, alive, word, space, n)
}

// park sleeps on the futex word until the condition holds, following the
// lost-wake-up protocol of the package documentation.
func (r *Ring) park(ctx context.Context, alive func() bool, word *uint32, space bool, n int) error {
	if ctx.Done() != nil {
		// Cancelling ctx wakes us like the peer would.
		stop := context.AfterFunc(ctx, func() {
			atomic.StoreUint32(word, 0)
			_, _ = shmem.Wake(word, 1)
		})
		defer stop()
	}
	slice := idleSlice
	if alive != nil {
		slice = liveSlice
	}
	// The first liveness check comes a slice after parking: a peer that
	// merely keeps us waiting briefly costs no check.
	checked := time.Now()
	for {
		atomic.StoreUint32(word, 1) // then re-check: the peer stores, then loads word
		if ok, err := r.ready(space, n); ok {
			atomic.StoreUint32(word, 0)
			return err
		}
		if err := ctx.Err(); err != nil {
			atomic.StoreUint32(word, 0)
			return err
		}
		if alive != nil {
			if now := time.Now(); now.Sub(checked) >= liveSlice {
				checked = now
				if !alive() {
					atomic.StoreUint32(word, 0)
					// What the peer committed before dying still counts.
					if ok, err := r.ready(space, n); ok {
						return err
					}
					return ErrPeerDead
				}
			}
		}
		if err := shmem.Wait(word, 1, slice); err != nil && err != shmem.ErrTimeout {
			// Cannot happen for an aligned word; do not spin on it.
			time.Sleep(slice)
		}
	}
}
