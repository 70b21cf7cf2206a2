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
// reads the owner's log area:
//
//   - a valid record naming this very lock word: the transaction was
//     logged, so validated and decided — roll it forward. The recoverer
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
// held under db.rmu.
func (db *DB) recovery(ctx context.Context) (*coord, error) {
	if db.recov != nil {
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
	return c, nil
}

// recoverLock recovers the expired lock w found on a copy of slot of
// shard s.
// It reports whether the lock's transaction was logged (rolled
// forward). Either way the copies of the slot itself are released last:
// a record the transaction locked without writing it (a failed Insert
// or Delete) is in no log entry.
func (db *DB) recoverLock(ctx context.Context, w lockWord, s, slot int) (forward bool, err error) {
	db.rmu.Lock()
	defer db.rmu.Unlock()
	rc, err := db.recovery(ctx)
	if err != nil {
		return false, err
	}
	rec, err := db.readLog(ctx, rc, w.owner())
	if err != nil && !errors.Is(err, errBadLog) {
		return false, err
	}
	if err == nil && rec.lock == w {
		db.stats.forward.Add(1)
		if err := db.rollForward(ctx, rc, rec); err != nil {
			return true, err
		}
		return true, db.rollBack(ctx, rc, w, s, slot)
	}
	db.stats.back.Add(1)
	return false, db.rollBack(ctx, rc, w, s, slot)
}

// readLog READs coordinator id's log area into rc's log buffer and
// decodes it (errBadLog: no valid record).
func (db *DB) readLog(ctx context.Context, rc *coord, id int) (logRecord, error) {
	if id >= len(db.nodes)*db.lay.Coordinators {
		return logRecord{}, fmt.Errorf("%w: coordinator %d of %d", errBadLog, id, len(db.nodes)*db.lay.Coordinators)
	}
	a := &db.arena
	n, off := db.logLoc(id)
	if err := db.iss.round(ctx, rc, []list{{node: n, wrs: []verbs.SendWR{rc.read(n, off, a.logBuf, db.lay.LogSize)}}}); err != nil {
		return logRecord{}, roundErr(err, nil)
	}
	rec, err := decodeLog(rc.buf[a.logBuf:a.logBuf+db.lay.LogSize], &db.lay, len(db.nodes))
	if err != nil {
		return rec, err
	}
	// The entries alias the buffer the adoption overwrites: copy them.
	for i := range rec.entries {
		e := &rec.entries[i]
		e.key, e.value = append([]byte(nil), e.key...), append([]byte(nil), e.value...)
	}
	return rec, nil
}

// rollBack releases every copy of slot of shard s still locked by w.
func (db *DB) rollBack(ctx context.Context, rc *coord, w lockWord, s, slot int) error {
	a, nodes := &db.arena, len(db.nodes)
	var b byNode
	for i, nd := range db.lay.replicas(s, nodes) {
		b.add(nd, rc.cas(nd, db.lay.slotOff(nd, s, slot, nodes)+slotLock, a.results+8*i, uint64(w), 0))
	}
	return roundErr(db.iss.round(ctx, rc, b.lists), nil)
}

// rollForward adopts logged transaction rec and installs its images on
// every copy it still has locked.
func (db *DB) rollForward(ctx context.Context, rc *coord, rec logRecord) error {
	a, nodes := &db.arena, len(db.nodes)
	mine := rc.nextLock(now())
	n := recordLen(rec.entries)
	encodeLog(rc.buf[a.logBuf:], mine, rec.entries)
	if err := db.iss.round(ctx, rc, []list{{node: rc.logNode, wrs: []verbs.SendWR{rc.write(rc.logNode, rc.logOff, a.logBuf, n)}}}); err != nil {
		return roundErr(err, nil)
	}
	type place struct{ node, entry int }
	var places []place
	var b byNode
	for i, e := range rec.entries {
		for _, nd := range db.lay.replicas(e.shard, nodes) {
			if len(places) == a.maxCopies {
				break
			}
			b.add(nd, rc.cas(nd, db.lay.slotOff(nd, e.shard, e.slot, nodes)+slotLock, a.results+8*len(places), uint64(rec.lock), uint64(mine)))
			places = append(places, place{nd, i})
		}
	}
	if err := db.iss.round(ctx, rc, b.lists); err != nil {
		return roundErr(err, nil)
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
	if err := db.iss.round(ctx, rc, b.lists); err != nil {
		return roundErr(err, nil)
	}
	return db.iss.post(rc, []list{{node: rc.logNode, wrs: []verbs.SendWR{rc.write(rc.logNode, rc.logOff, a.zero, 8)}}})
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
	if id < 0 || id >= len(db.nodes)*db.lay.Coordinators {
		return out, fmt.Errorf("%w: coordinator %d (0 to %d)", verbs.ErrInvalidArg, id, len(db.nodes)*db.lay.Coordinators-1)
	}
	db.life.RLock()
	defer db.life.RUnlock()
	if db.closed.Load() {
		return out, txn.ErrClosed
	}
	db.rmu.Lock()
	defer db.rmu.Unlock()
	rc, err := db.recovery(ctx)
	if err != nil {
		return out, err
	}
	rec, err := db.readLog(ctx, rc, id)
	switch {
	case err == nil:
		if !rec.lock.expired(now(), db.cfg.Skew) {
			return out, fmt.Errorf("%w: until %v", ErrLeaseLive, rec.lock.deadline().Add(db.cfg.Skew))
		}
		out.Logged = true
		if out.Copies, err = db.rollForwardCount(ctx, rc, rec); err != nil {
			return out, err
		}
	case !errors.Is(err, errBadLog):
		return out, err
	}
	n, off := id/db.lay.Coordinators, int64(offClaims+8*(id%db.lay.Coordinators))
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
	a, nodes := &db.arena, len(db.nodes)
	var b byNode
	k := 0
	for _, e := range rec.entries {
		for _, nd := range db.lay.replicas(e.shard, nodes) {
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
