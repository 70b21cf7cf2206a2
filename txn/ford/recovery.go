package ford

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Recovery. A lock whose lease is over (by more than Skew) belongs to a
// coordinator that will never write in place again (it checks its lease,
// with Margin, before its log and before its writes). Whoever finds one
// reads the owner's log area, every live copy of it (logcopies.go):
//
//   - a valid record naming this very lock word on any copy: the
//     transaction was logged, so validated and decided — roll it forward.
//     The recoverer first writes the record to every live copy, then
//     adopts it: it logs the same entries under a lock word of its own,
//     swaps that word in (CAS from the dead one) on every copy still
//     locked by the dead transaction, then writes each such copy's image
//     and unlocks it. A recoverer that dies half-way leaves copies locked
//     by its own word, which its own log rolls forward in turn.
//   - anything else (truncated, torn, another transaction's): the
//     transaction never completed its log and wrote nothing in place —
//     roll it back: release this record's copies by a CAS from the dead
//     word to 0 (never freeing a lock someone took since).

// ErrLeaseLive: Recover was asked to recover a coordinator whose logged
// transaction's lease is not over yet.
var ErrLeaseLive = errors.New("ford: the coordinator's lease is not over")

// recovery is the coordinator recoveries run on (claimed at the first),
// held under db.rmu, routing by view v.
func (db *DB) recovery(ctx context.Context, v *view) (*coord, error) {
	if db.recov != nil {
		db.recov.v = v
		return db.recov, nil
	}
	db.cmu.Lock()
	db.ncoord++
	idx := db.ncoord
	db.cmu.Unlock()
	c, err := db.claim(ctx, idx)
	if err != nil {
		return nil, err
	}
	db.recov = c
	c.v = v
	return c, nil
}

// recoverLock recovers the expired lock w found on a copy of slot of
// shard s, under view v (the finder's).
// It reports whether the lock's transaction was logged (rolled
// forward). Either way the copies of the slot itself are released last:
// a record the transaction locked without writing it (a failed Insert
// or Delete) is in no log entry.
func (db *DB) recoverLock(ctx context.Context, v *view, w lockWord, s, slot int) (forward bool, err error) {
	db.rmu.Lock()
	defer db.rmu.Unlock()
	// Recovery adopts transactions under a lock word of its own: like a
	// transaction's first lock, only under the configuration's lease.
	if err := v.leased(now()); err != nil {
		return false, err
	}
	rc, err := db.recovery(ctx, v)
	if err != nil {
		return false, err
	}
	recs, err := db.readLogs(ctx, rc, w.owner())
	if err != nil {
		return false, err
	}
	for _, rec := range recs {
		if rec.lock != w {
			continue
		}
		db.stats.forward.Add(1)
		if err := db.replicate(ctx, rc, w.owner(), rec); err != nil {
			return true, err
		}
		if err := db.rollForward(ctx, rc, rec); err != nil {
			return true, err
		}
		return true, db.rollBack(ctx, rc, w, s, slot)
	}
	db.stats.back.Add(1)
	return false, db.rollBack(ctx, rc, w, s, slot)
}

// rollBack releases every copy of slot of shard s still locked by w.
func (db *DB) rollBack(ctx context.Context, rc *coord, w lockWord, s, slot int) error {
	a, nodes := &db.arena, db.n
	var b byNode
	for i, nd := range rc.v.replicas(s) {
		b.add(nd, rc.cas(nd, db.lay.slotOff(nd, s, slot, nodes)+slotLock, a.results+8*i, uint64(w), 0))
	}
	return db.recoveryRound(ctx, rc, b.lists)
}

// recoveryRound is a round of a recovery: posted only while its view
// allows (view.posting), as a transaction's.
func (db *DB) recoveryRound(ctx context.Context, rc *coord, lists []list) error {
	if err := rc.v.posting(now(), db.cfg.Lease, db.cfg.Margin); err != nil {
		return err
	}
	return roundErr(db.iss.round(ctx, rc, lists), nil)
}

// rollForward adopts logged transaction rec and installs its images on
// every copy it still has locked.
func (db *DB) rollForward(ctx context.Context, rc *coord, rec logRecord) error {
	a, nodes := &db.arena, db.n
	mine := rc.nextLock(now())
	n := recordLen(rec.entries)
	encodeLog(rc.buf[a.logBuf:], mine, rec.entries)
	if err := db.writeLogCopies(ctx, rc, rc.id, n); err != nil {
		return err
	}
	type place struct{ node, entry int }
	var places []place
	var b byNode
	for i, e := range rec.entries {
		for _, nd := range rc.v.replicas(e.shard) {
			if len(places) == a.maxCopies {
				break
			}
			b.add(nd, rc.cas(nd, db.lay.slotOff(nd, e.shard, e.slot, nodes)+slotLock, a.results+8*len(places), uint64(rec.lock), uint64(mine)))
			places = append(places, place{nd, i})
		}
	}
	if err := db.recoveryRound(ctx, rc, b.lists); err != nil {
		return err
	}
	b = byNode{}
	loc := a.images
	at := map[int]int{} // entry → its image's offset
	for k, p := range places {
		if rc.word(a.results+8*k) != uint64(rec.lock) {
			continue // installed already, or another recoverer's
		}
		e := &rec.entries[p.entry]
		size := imageLen(len(e.value))
		img, ok := at[p.entry]
		if !ok {
			if loc+size > a.checks {
				return fmt.Errorf("%w: a log record's images overflow the buffer", txn.ErrTooLarge)
			}
			putImage(rc.buf[loc:loc+size], e.version, e.key, e.present, e.value)
			img, at[p.entry] = loc, loc
			loc += (size + 7) &^ 7
		}
		off := db.lay.slotOff(p.node, e.shard, e.slot, nodes)
		b.add(p.node, rc.write(p.node, off+slotVersion, img, size), rc.write(p.node, off+slotLock, a.zero, 8))
	}
	if err := db.recoveryRound(ctx, rc, b.lists); err != nil {
		return err
	}
	return db.truncateLog(rc)
}

// Recovered says what Recover did.
type Recovered struct {
	// Logged: the coordinator's log held a transaction, which was
	// rolled forward (Copies of its records' copies installed by this
	// call; 0 when its own commit or an earlier recovery had).
	Logged bool
	Copies int
	// Freed: the coordinator id's claim was released.
	Freed bool
}

// Recover recovers coordinator id of a client known to be dead (the
// `txn recover` command): a logged transaction is rolled forward once
// its lease is over (ErrLeaseLive before), and the id's claim is freed.
// Locks the coordinator took without logging are released by the
// clients that find them (their lease is over) or by Sweep.
func (db *DB) Recover(ctx context.Context, id int) (Recovered, error) {
	var out Recovered
	if id < 0 || id >= db.n*db.lay.Coordinators {
		return out, fmt.Errorf("%w: coordinator %d (0 to %d)", verbs.ErrInvalidArg, id, db.n*db.lay.Coordinators-1)
	}
	db.life.RLock()
	defer db.life.RUnlock()
	if db.closed.Load() {
		return out, txn.ErrClosed
	}
	v, err := db.current(ctx)
	if err != nil {
		return out, err
	}
	db.rmu.Lock()
	defer db.rmu.Unlock()
	rc, err := db.recovery(ctx, v)
	if err != nil {
		return out, err
	}
	recs, err := db.readLogs(ctx, rc, id)
	if err != nil {
		return out, err
	}
	if len(recs) > 0 {
		rec := recs[0] // the newest: a coordinator's lock words only grow
		for _, r := range recs[1:] {
			if r.lock > rec.lock {
				rec = r
			}
		}
		if !rec.lock.expired(now(), db.cfg.Skew) {
			return out, fmt.Errorf("%w: until %v", ErrLeaseLive, rec.lock.deadline().Add(db.cfg.Skew))
		}
		out.Logged = true
		if err := db.replicate(ctx, rc, id, rec); err != nil {
			return out, err
		}
		if out.Copies, err = db.rollForwardCount(ctx, rc, rec); err != nil {
			return out, err
		}
	}
	n, off := id/db.lay.Coordinators, int64(offClaims+8*(id%db.lay.Coordinators))
	if !db.live(v, n) {
		return out, nil // the claim word went with its node
	}
	a := &db.arena
	if err := db.iss.round(ctx, rc, []list{{node: n, wrs: []verbs.SendWR{rc.read(n, off, a.results, 8)}}}); err != nil {
		return out, roundErr(err, nil)
	}
	if w := rc.word(a.results); w != 0 {
		if err := db.iss.round(ctx, rc, []list{{node: n, wrs: []verbs.SendWR{rc.cas(n, off, a.results, w, 0)}}}); err != nil {
			return out, roundErr(err, nil)
		}
		out.Freed = rc.word(a.results) == w
	}
	return out, nil
}

// rollForwardCount is rollForward returning how many copies were still
// locked by the transaction (and so installed now).
func (db *DB) rollForwardCount(ctx context.Context, rc *coord, rec logRecord) (int, error) {
	held, err := db.countLocked(ctx, rc, rec)
	if err != nil || held == 0 {
		return 0, err
	}
	return held, db.rollForward(ctx, rc, rec)
}

// countLocked counts the copies of rec's records locked by rec's word.
func (db *DB) countLocked(ctx context.Context, rc *coord, rec logRecord) (int, error) {
	a, nodes := &db.arena, db.n
	var b byNode
	k := 0
	for _, e := range rec.entries {
		for _, nd := range rc.v.replicas(e.shard) {
			if k == a.maxReads {
				break
			}
			b.add(nd, rc.read(nd, db.lay.slotOff(nd, e.shard, e.slot, nodes)+slotLock, a.checks+8*k, 8))
			k++
		}
	}
	if err := db.iss.round(ctx, rc, b.lists); err != nil {
		return 0, roundErr(err, nil)
	}
	held := 0
	for i := range k {
		if rc.word(a.checks+8*i) == uint64(rec.lock) {
			held++
		}
	}
	return held, nil
}
