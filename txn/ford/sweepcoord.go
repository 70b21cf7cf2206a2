package ford

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// SweepCoordinator is Sweep that also waits out the leases of the locks
// coordinator id holds and then recovers them: what `txn recover
// --coordinator ID --sweep` runs for a coordinator known to be dead, so
// that the locks of a transaction it took without logging are released
// without a client having to meet them. Other coordinators' locks are
// swept as Sweep does (expired: recovered; live: counted in Live).
//
// A dead coordinator's locks all expire within Lease plus Skew of the
// call; a lock of id still live after that was taken after the call
// began — id is alive — and SweepCoordinator returns ErrLeaseLive.
func (db *DB) SweepCoordinator(ctx context.Context, id int) (Swept, error) {
	if id < 0 || id >= len(db.nodes)*db.lay.Coordinators {
		return Swept{}, fmt.Errorf("%w: coordinator %d (0 to %d)", verbs.ErrInvalidArg, id, len(db.nodes)*db.lay.Coordinators-1)
	}
	limit := now().Add(MaxLease + 2*db.cfg.Skew)
	var out Swept
	for {
		s, wait, err := db.sweepOwner(ctx, id)
		out.Recovered += s.Recovered
		out.Live = s.Live
		if err != nil || wait.IsZero() {
			return out, err
		}
		if wait.After(limit) {
			return out, fmt.Errorf("%w: coordinator %d holds a lock until %v, taken after the sweep began: it is alive", ErrLeaseLive, id, wait)
		}
		t := time.NewTimer(time.Until(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return out, ctx.Err()
		case <-t.C:
		}
	}
}

// sweepOwner is one pass of SweepCoordinator: it recovers the expired
// locks and returns when the last live lock of id expires (zero: none).
func (db *DB) sweepOwner(ctx context.Context, id int) (out Swept, wait time.Time, err error) {
	db.life.RLock()
	defer db.life.RUnlock()
	if db.closed.Load() {
		return out, wait, txn.ErrClosed
	}
	v, err := db.current(ctx)
	if err != nil {
		return out, wait, err
	}
	held, err := db.scanLocks(ctx, v)
	if err != nil {
		return out, wait, err
	}
	for _, h := range held {
		if !h.w.expired(now(), db.cfg.Skew) {
			out.Live++
			if end := h.w.deadline().Add(db.cfg.Skew + time.Millisecond); h.w.owner() == id && end.After(wait) {
				wait = end
			}
			continue
		}
		if _, err := db.recoverLock(ctx, v, h.w, h.shard, h.slot); err != nil {
			return out, wait, err
		}
		out.Recovered++
	}
	return out, wait, nil
}
