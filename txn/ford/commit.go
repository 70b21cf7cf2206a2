package ford

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Commit implements txn.Tx. A read-write transaction's commit is three
// rounds after execution: validate the read set (one list per node), WRITE
// the log record to the log node, then per node one list WRITEing the
// new images and unlocking (every copy, primary and backups).
func (t *Tx) Commit() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return txn.ErrDone
	}
	t.db.life.RLock()
	defer t.db.life.RUnlock()
	if t.db.closed.Load() {
		t.abort(nil)
		return txn.ErrClosed
	}
	if err := t.ctx.Err(); err != nil {
		return t.fail(txn.Abort(txn.Timeout, nil, err))
	}
	var writes, reads, lockedOnly []*rec
	for _, r := range t.seq {
		switch {
		case r.write:
			writes = append(writes, r)
		case r.locked:
			lockedOnly = append(lockedOnly, r)
		case r.read && r.slot >= 0:
			reads = append(reads, r)
		}
	}
	if len(writes)+len(lockedOnly) == 0 {
		return t.commitReadOnly(reads)
	}
	err := t.commitReadWrite(writes, reads, lockedOnly)
	if err == ErrStopped || t.c.broken && errors.Is(err, txn.ErrUnreachable) {
		t.done = true
		t.c.broken = true // its locks and log are recovery's now
		t.finish()
		return err
	}
	if err != nil {
		return t.fail(err)
	}
	return nil
}

// commitReadOnly validates a read-only transaction (not needed for a
// single read: it was atomic).
func (t *Tx) commitReadOnly(reads []*rec) error {
	if len(reads) > 1 && !t.db.cfg.SkipValidation {
		if _, err := t.validate(reads); err != nil {
			return t.failExec(err)
		}
	}
	t.db.stats.readOnly.Add(1)
	t.committed, t.done = true, true
	t.trace()
	t.db.stats.commits.Add(1)
	t.finish()
	return nil
}

// commitReadWrite runs the commit's rounds; each write in place only
// with enough of the lease left (fencing: doc.go).
func (t *Tx) commitReadWrite(writes, reads, lockedOnly []*rec) error {
	db := t.db
	if db.stop(StepLocked) {
		return ErrStopped
	}
	rounds := uint64(0)
	if len(reads) > 0 && !db.cfg.SkipValidation {
		if err := t.leaseLeft(); err != nil {
			return err
		}
		n, err := t.validate(reads)
		rounds += n
		if err != nil {
			return t.failExec(err) // before the log: nothing landed
		}
	}
	if db.stop(StepValidated) {
		return ErrStopped
	}
	if len(writes) > 0 {
		if err := t.leaseLeft(); err != nil {
			return err
		}
		if err := t.writeLog(writes); err != nil {
			if errors.Is(err, txn.ErrUnreachable) && (len(db.cfg.Members) == 0 || t.c.broken) {
				// The log node's connection failed: the record may have
				// landed, and only whoever can read it may decide. The
				// locks stay for the lease and its recovery. (With a
				// membership, the coordinator decides itself once the
				// configuration moved on: selfRecover below.)
				t.c.broken = true
				return fmt.Errorf("%w: the outcome is unknown", err)
			}
			// The record may have landed: what recovery finds decides.
			forward, rerr := t.selfRecover()
			switch {
			case rerr != nil:
				return fmt.Errorf("%w: the outcome is unknown (%w)", txn.ErrUnreachable, rerr)
			case !forward:
				return err
			}
			return t.committedBy(rounds + 1)
		}
		rounds++
		if db.stop(StepLogged) {
			return ErrStopped
		}
	}
	// From here the transaction is decided: its log (if any) makes
	// recovery roll it forward.
	if err := t.leaseLeft(); err != nil {
		if len(writes) == 0 {
			return err
		}
		// Too little lease left to write in place: recovery's job (ours,
		// once the lease is over); the log rolls it forward.
		if _, err := t.selfRecover(); err != nil {
			return fmt.Errorf("%w: the outcome is unknown (%w)", txn.ErrUnreachable, err)
		}
		return t.committedBy(rounds)
	}
	// Decided: the writes go out even if the caller's context ends now
	// (bounded by the lease: past it, recovery's job).
	dctx, cancel := context.WithDeadline(context.Background(), t.lock.deadline())
	defer cancel()
	stopped, err := t.writeInPlace(dctx, writes, lockedOnly)
	if stopped {
		return ErrStopped
	}
	rounds++
	if err != nil {
		if len(writes) == 0 {
			return err // only unlocks: an abort's release does them
		}
		// Some lists may have landed; the log stands: recovery rolls the
		// transaction forward, and that is its outcome.
		db.log.Warn("ford: commit writes failed; the log decides", "err", err)
		if _, err := t.selfRecover(); err != nil {
			return fmt.Errorf("%w: the outcome is unknown (%w)", txn.ErrUnreachable, err)
		}
		return t.committedBy(rounds)
	}
	if db.stop(StepCommitted) {
		return ErrStopped
	}
	if len(writes) > 0 {
		_ = db.truncateLog(t.c)
	}
	return t.committedBy(rounds)
}

// committedBy ends a read-write transaction that committed after rounds
// round trips.
func (t *Tx) committedBy(rounds uint64) error {
	for _, r := range t.seq {
		if r.write {
			t.db.keys.Store(string(r.key), r.slot) // an insert's slot, now the key's
		}
	}
	t.db.stats.commitRound(rounds)
	t.committed, t.done = true, true
	t.trace()
	t.db.stats.commits.Add(1)
	t.finish()
	return nil
}

// leaseLeft is nil when the transaction's lease has more than the margin
// left, else a Timeout abort.
func (t *Tx) leaseLeft() error {
	if left := time.Until(t.lock.deadline()); left < t.db.cfg.Margin {
		return txn.Abort(txn.Timeout, nil, fmt.Errorf("ford: %v of the lease left (margin %v)", left, t.db.cfg.Margin))
	}
	return nil
}

// validate re-reads the lock and version words of the records read from
// their primaries, one list per node: unlocked and unchanged, or a
// ValidationFailed abort. It returns the rounds it took.
func (t *Tx) validate(reads []*rec) (uint64, error) {
	db, c, a := t.db, t.c, &t.db.arena
	if len(reads) > a.maxReads {
		return 0, fmt.Errorf("%w: %d records read (at most %d)", txn.ErrFull, len(reads), a.maxReads)
	}
	if err := t.posting(); err != nil {
		return 0, err
	}
	nodes := db.n
	var b byNode
	for i, r := range reads {
		p := c.v.primary(r.shard)
		b.add(p, c.read(p, db.lay.slotOff(p, r.shard, r.slot, nodes), a.checks+16*i, 16))
	}
	if err := db.iss.round(t.ctx, c, b.lists); err != nil {
		return 1, roundErr(err, nil)
	}
	for i, r := range reads {
		lock, ver := c.word(a.checks+16*i), c.word(a.checks+16*i+8)
		if lock != 0 || ver != r.version {
			return 1, txn.Abort(txn.ValidationFailed, r.key, nil)
		}
	}
	return 1, nil
}

// entries are the log entries of writes.
func (t *Tx) entries(writes []*rec) []logEntry {
	es := make([]logEntry, len(writes))
	for i, r := range writes {
		es[i] = logEntry{shard: r.shard, slot: r.slot, version: r.lockVer + 1, present: !r.del, key: r.key, value: r.nval}
		if r.del {
			es[i].value = nil
		}
	}
	return es
}

// writeLog WRITEs the transaction's log record to its log area.
func (t *Tx) writeLog(writes []*rec) error {
	db, c, a := t.db, t.c, &t.db.arena
	es := t.entries(writes)
	n := recordLen(es)
	if n > db.lay.LogSize {
		return fmt.Errorf("%w: a %d-byte log record (log areas of %d)", txn.ErrTooLarge, n, db.lay.LogSize)
	}
	encodeLog(c.buf[a.logBuf:], t.lock, es)
	return db.writeLogCopies(t.ctx, c, c.id, n)
}

// writeInPlace writes every copy of every written record (new image,
// then unlock) and unlocks the records locked but not written: one list
// per node. With a hook it may stop half-way (StepHalfWritten,
// StepHalfUnlocked), as a crash would.
func (t *Tx) writeInPlace(ctx context.Context, writes, lockedOnly []*rec) (stopped bool, err error) {
	db, c, a := t.db, t.c, &t.db.arena
	nodes := db.n
	type copyWR struct {
		node         int
		data, unlock verbs.SendWR
	}
	var copies []copyWR
	loc := a.images
	for _, r := range writes {
		n := imageLen(len(r.nval))
		if loc+n > a.checks {
			return false, fmt.Errorf("%w: %d records written", txn.ErrTooLarge, len(writes))
		}
		putImage(c.buf[loc:loc+n], r.lockVer+1, r.key, !r.del, r.nval)
		for _, nd := range c.v.replicas(r.shard) {
			off := db.lay.slotOff(nd, r.shard, r.slot, nodes)
			copies = append(copies, copyWR{nd, c.write(nd, off+slotVersion, loc, n), c.write(nd, off+slotLock, a.zero, 8)})
		}
		loc += (n + 7) &^ 7
	}
	var b byNode
	half := len(copies) / 2
	switch {
	case db.stop(StepHalfWritten):
		for _, cp := range copies[:max(half, 1)] {
			b.add(cp.node, cp.data)
		}
		stopped = true
	case db.stop(StepHalfUnlocked):
		for i, cp := range copies {
			b.add(cp.node, cp.data)
			if i < half {
				b.add(cp.node, cp.unlock)
			}
		}
		stopped = true
	default:
		for _, cp := range copies {
			b.add(cp.node, cp.data, cp.unlock)
		}
		for _, r := range lockedOnly {
			for _, nd := range c.v.replicas(r.shard) {
				b.add(nd, c.write(nd, db.lay.slotOff(nd, r.shard, r.slot, nodes)+slotLock, a.zero, 8))
			}
		}
	}
	if err := db.iss.round(ctx, c, b.lists); err != nil {
		return stopped, roundErr(err, nil)
	}
	return stopped, nil
}

// selfRecover finishes the transaction's own commit as recovery would,
// once its lease is over: its log (if complete) rolls it forward, else
// its locks are released. For a coordinator that may no longer write in
// place itself.
// It reports whether the log rolled the transaction forward (it
// committed).
func (t *Tx) selfRecover() (forward bool, err error) {
	wait := time.Until(t.lock.deadline().Add(t.db.cfg.Skew)) + time.Millisecond
	time.Sleep(max(wait, 0))
	var o ownRecovery
	if len(t.db.cfg.Members) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), t.db.cfg.Lease)
		defer cancel()
		err := t.recoverOwn(ctx, t.c.v, &o)
		return o.forward, err
	}
	// A node of the transaction's view may be gone: recover under the
	// newest configuration in use, and again under the next one while
	// a node is unreachable (bounded by selfRecoverWait).
	deadline := time.Now().Add(selfRecoverWait)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		v, err := t.db.current(ctx)
		if err == nil {
			err = t.recoverOwn(ctx, v, &o)
		}
		cancel()
		if err == nil {
			return o.forward, nil
		}
		if !errors.Is(err, txn.ErrUnreachable) && !errors.Is(err, ErrStale) || time.Now().After(deadline) {
			return o.forward, err
		}
		t.db.kickRenew()
		time.Sleep(10 * time.Millisecond)
	}
}

// ownRecovery is what a coordinator's recovery of its own commit
// decided: forward once the first record recovered said so.
type ownRecovery struct{ decided, forward bool }

// recoverOwn recovers the records t still holds under view v.
func (t *Tx) recoverOwn(ctx context.Context, v *view, o *ownRecovery) error {
	for _, r := range t.seq {
		if !r.locked {
			continue
		}
		fw, err := t.db.recoverLock(ctx, v, t.lock, r.shard, r.slot)
		if err != nil {
			return err
		}
		if !o.decided {
			o.forward, o.decided = fw, true
		}
		r.locked = false
	}
	return nil
}

// selfRecoverWait bounds how long a coordinator that must recover its
// own commit waits for a configuration it may use.
const selfRecoverWait = 10 * time.Second

// trace records the committed transaction's reads and writes.
func (t *Tx) trace() {
	for _, r := range t.seq {
		switch {
		case r.write:
			if r.read {
				t.reads = append(t.reads, txn.Access{Key: string(r.key), Version: r.version, Deleted: !r.present})
			}
			t.writes = append(t.writes, txn.Access{Key: string(r.key), Version: r.lockVer + 1, Deleted: r.del})
		case r.locked:
			t.reads = append(t.reads, txn.Access{Key: string(r.key), Version: r.lockVer, Deleted: !r.lockPresent})
		case r.read:
			t.reads = append(t.reads, txn.Access{Key: string(r.key), Version: r.version, Deleted: !r.present})
		}
	}
}

// releaseAll releases every lock the transaction holds (an abort): a CAS
// from its lock word to 0 on every copy, so that a lock recovery already
// freed (and another transaction took) stays taken.
func (t *Tx) releaseAll() {
	var held []*rec
	for _, r := range t.seq {
		if r.locked {
			held = append(held, r)
		}
	}
	if len(held) == 0 || t.c.broken {
		return
	}
	db, c, a := t.db, t.c, &t.db.arena
	ctx, cancel := context.WithTimeout(context.Background(), db.cfg.Lease)
	defer cancel()
	nodes := db.n
	var b byNode
	k := 0
	for _, r := range held {
		for _, nd := range c.v.replicas(r.shard) {
			if k == a.maxCopies {
				break
			}
			b.add(nd, c.cas(nd, db.lay.slotOff(nd, r.shard, r.slot, nodes)+slotLock, a.results+8*k, uint64(t.lock), 0))
			k++
		}
		r.locked = false
	}
	if err := db.iss.round(ctx, c, b.lists); err != nil {
		db.log.Warn("ford: releasing locks; their lease frees them", "err", err)
	}
}

// unlockCopies releases the copies got (indexes among the replicas) of
// a slot of shard s.
func (t *Tx) unlockCopies(s, slot int, got []int) {
	if len(got) == 0 {
		return
	}
	db, c, a := t.db, t.c, &t.db.arena
	nodes := db.n
	reps := c.v.replicas(s)
	var b byNode
	for k, i := range got {
		nd := reps[i]
		b.add(nd, c.cas(nd, db.lay.slotOff(nd, s, slot, nodes)+slotLock, a.results+8*k, uint64(t.lock), 0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.cfg.Lease)
	defer cancel()
	if err := db.iss.round(ctx, c, b.lists); err != nil {
		db.log.Warn("ford: releasing locks; their lease frees them", "err", err)
	}
}

// unlockRec releases every copy of r's slot.
func (t *Tx) unlockRec(r *rec, slot int) {
	all := make([]int, len(t.c.v.replicas(r.shard)))
	for i := range all {
		all[i] = i
	}
	t.unlockCopies(r.shard, slot, all)
}
