package ford

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/rdmakit/rdmakit/txn"
)

// Tx is a FORD transaction: it implements txn.Tx and txn.Traced. Reads
// are READs (of a backup with Config.BackupReads); the first write of a
// record locks it and reads it in one list (hitchhiked locking); Commit
// validates, logs and writes (commit.go).
type Tx struct {
	db   *DB
	ctx  context.Context
	c    *coord
	mu   sync.Mutex // against Close's abort
	recs map[string]*rec
	seq  []*rec // recs in first-access order
	lock lockWord
	done bool

	reads, writes []txn.Access // the trace, once committed
	committed     bool
}

var (
	_ txn.Tx     = (*Tx)(nil)
	_ txn.Traced = (*Tx)(nil)
)

// rec is what a transaction knows of one record.
type rec struct {
	key   []byte
	shard int
	slot  int // -1: no slot (absent from a full window)

	// Read by Get (not through a lock): the version seen, validated at
	// commit.
	read    bool
	version uint64
	present bool
	value   []byte

	// Locked (every copy) at version lockVer: the record as the lock
	// saw it.
	locked      bool
	lockVer     uint64
	lockPresent bool
	lockValue   []byte

	// Written: the new value (del: deleted).
	write bool
	del   bool
	nval  []byte
}

// begin checks that an operation may run: not finished, key in limits,
// context alive, DB open. It holds t.mu and the DB's life until end.
func (t *Tx) begin(key []byte, value []byte) error {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return txn.ErrDone
	}
	if err := txn.Check(key, value); err != nil {
		t.mu.Unlock()
		return err
	}
	t.db.life.RLock()
	if t.db.closed.Load() {
		t.abort(nil)
		t.end()
		return txn.ErrClosed
	}
	if err := t.ctx.Err(); err != nil {
		err = t.fail(txn.Abort(txn.Timeout, key, err))
		t.end()
		return err
	}
	return nil
}

// end releases what begin took.
func (t *Tx) end() {
	t.db.life.RUnlock()
	t.mu.Unlock()
}

// Get implements txn.Tx.
func (t *Tx) Get(key []byte) ([]byte, error) {
	if err := t.begin(key, nil); err != nil {
		return nil, err
	}
	defer t.end()
	r := t.recs[string(key)]
	switch {
	case r != nil && r.write:
		if r.del {
			return nil, txn.ErrNotFound
		}
		return bytes.Clone(r.nval), nil
	case r != nil && r.locked:
		if !r.lockPresent {
			return nil, txn.ErrNotFound
		}
		return bytes.Clone(r.lockValue), nil
	case r != nil && r.read:
		if !r.present {
			return nil, txn.ErrNotFound
		}
		return bytes.Clone(r.value), nil
	}
	r = t.rec(key)
	if err := t.readRec(r); err != nil {
		return nil, t.failExec(err)
	}
	if !r.present {
		return nil, txn.ErrNotFound
	}
	return bytes.Clone(r.value), nil
}

// Put implements txn.Tx.
func (t *Tx) Put(key, value []byte) error {
	if err := t.begin(key, value); err != nil {
		return err
	}
	defer t.end()
	r, err := t.locked(key)
	if err != nil {
		return t.failExec(err)
	}
	r.write, r.del, r.nval = true, false, bytes.Clone(value)
	return nil
}

// Insert implements txn.Tx.
func (t *Tx) Insert(key, value []byte) error {
	if err := t.begin(key, value); err != nil {
		return err
	}
	defer t.end()
	r, err := t.locked(key)
	if err != nil {
		return t.failExec(err)
	}
	if r.write && !r.del || !r.write && r.lockPresent {
		return fmt.Errorf("%w: %q", txn.ErrExists, key)
	}
	r.write, r.del, r.nval = true, false, bytes.Clone(value)
	return nil
}

// Delete implements txn.Tx.
func (t *Tx) Delete(key []byte) error {
	if err := t.begin(key, nil); err != nil {
		return err
	}
	defer t.end()
	r, err := t.locked(key)
	if err != nil {
		return t.failExec(err)
	}
	if r.write && r.del || !r.write && !r.lockPresent {
		return fmt.Errorf("%w: %q", txn.ErrNotFound, key)
	}
	r.write, r.del, r.nval = true, true, nil
	return nil
}

// Abort implements txn.Tx: the locks taken are released.
func (t *Tx) Abort() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.db.life.RLock()
	defer t.db.life.RUnlock()
	t.abort(nil)
}

// closeAbort is Close's abort of a transaction left open.
func (t *Tx) closeAbort() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.abort(nil)
	}
}

// Trace implements txn.Traced.
func (t *Tx) Trace() (reads, writes []txn.Access) {
	if !t.committed {
		return nil, nil
	}
	return t.reads, t.writes
}

// rec returns key's record, new (with its shard) if the transaction has
// none.
func (t *Tx) rec(key []byte) *rec {
	if r := t.recs[string(key)]; r != nil {
		return r
	}
	r := &rec{key: bytes.Clone(key), shard: txn.Shard(key, t.db.n), slot: -1}
	t.recs[string(key)] = r
	t.seq = append(t.seq, r)
	return r
}

// fail ends the transaction on error err when it is an abort (or the
// connection failed): its locks are released. Other errors (ErrNotFound,
// ErrTooLarge, ErrFull) leave it open.
func (t *Tx) fail(err error) error {
	if errors.Is(err, txn.ErrAborted) || errors.Is(err, txn.ErrUnreachable) {
		t.abort(err)
	}
	return err
}

// failExec is fail for an error met before the commit point: nothing of
// the transaction can have landed, so with a membership (Config.Members)
// an unreachable node makes it an abort (txn.Run runs it again, under
// the configuration that took the node out), not an unknown outcome.
func (t *Tx) failExec(err error) error {
	err = t.fail(err)
	if len(t.db.cfg.Members) > 0 && errors.Is(err, txn.ErrUnreachable) && !errors.Is(err, txn.ErrAborted) {
		return txn.Abort(txn.Timeout, nil, err)
	}
	return err
}

// abort releases the locks and ends the transaction.
func (t *Tx) abort(err error) {
	if t.done {
		return
	}
	t.done = true
	switch txn.ReasonOf(err) {
	case txn.LockConflict:
		t.db.stats.lockAborts.Add(1)
	case txn.ValidationFailed:
		t.db.stats.validAborts.Add(1)
	default:
		t.db.stats.others.Add(1)
	}
	t.releaseAll()
	t.finish()
}

// finish gives the coordinator back.
func (t *Tx) finish() {
	t.db.cmu.Lock()
	delete(t.db.open, t)
	t.db.cmu.Unlock()
	t.db.iss.end(t.c, t.committed)
	t.db.putCoord(t.c)
}

// readRec reads r (not locked by t) from a copy: its value and version.
func (t *Tx) readRec(r *rec) error {
	db, v := t.db, t.c.v
	n := v.primary(r.shard)
	if b := v.conf.Backups[r.shard]; db.cfg.BackupReads && len(b) > 0 {
		n = b[rand.N(len(b))]
	}
	for try := 0; ; try++ {
		slot, s, err := t.lookup(r, n)
		if err != nil {
			return err
		}
		if s.lock != 0 && lockWord(s.lock).expired(now(), db.cfg.Skew) && try < 3 {
			if _, err := db.recoverLock(t.ctx, v, lockWord(s.lock), r.shard, slot); err != nil {
				return err
			}
			continue
		}
		r.slot, r.read, r.version, r.present = slot, true, s.version, s.present && s.klen > 0
		r.value = bytes.Clone(s.value)
		return nil
	}
}

// locked locks key's record for writing (once per transaction): a
// CAS of its lock word on every copy, the primary's in one list with a
// READ of its slot.
func (t *Tx) locked(key []byte) (*rec, error) {
	r := t.rec(key)
	if r.locked {
		return r, nil
	}
	db := t.db
	slot := r.slot
	if known, ok := db.keys.Load(string(key)); ok {
		slot = known.(int)
	} else if !r.read || r.slot < 0 || db.cfg.BackupReads {
		s, _, err := t.lookup(r, t.c.v.primary(r.shard))
		if err != nil {
			return nil, err
		}
		slot = s
	}
	if slot < 0 {
		return nil, fmt.Errorf("%w: no slot for %q in its window", txn.ErrFull, key)
	}
	if t.lock == 0 {
		// The first lock: under the configuration's lease (doc.go,
		// Failover), so that its deadline is within the lease plus Lease.
		if err := t.c.v.leased(now()); err != nil {
			return nil, err
		}
		t.lock = t.c.nextLock(now())
	}
	s, err := t.lockRound(r, slot)
	for k := 1; errors.Is(err, errLive) && t.waitable(r) && db.iss.conflict(t.c, k); k++ {
		s, err = t.lockRound(r, slot)
	}
	if errors.Is(err, errLive) {
		err = txn.Abort(txn.LockConflict, key, nil)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case s.klen == 0:
	case bytes.Equal(s.key, key):
		db.keys.Store(string(key), slot)
	default: // the empty slot was taken by another key meanwhile
		t.unlockRec(r, slot)
		return nil, txn.Abort(txn.LockConflict, key, nil)
	}
	r.slot, r.locked, r.lockVer, r.lockPresent = slot, true, s.version, s.klen > 0 && s.present
	r.lockValue = bytes.Clone(s.value)
	if r.read && (r.version != r.lockVer || r.present != r.lockPresent) {
		return nil, txn.Abort(txn.ValidationFailed, key, nil)
	}
	return r, nil
}

// waitable reports whether waiting for r's lock can pay: only if the
// transaction has not read r — after a wait the record has most likely
// changed under the owner's commit, failing the validation of the
// read — and holds no other lock: a wait while holding locks lengthens
// the conflicts of everyone who waits on those, and two transactions may
// wait on each other.
func (t *Tx) waitable(r *rec) bool {
	if r.read {
		return false
	}
	for _, o := range t.seq {
		if o.locked {
			return false
		}
	}
	return true
}

// errLive: a lock round found the record locked by a live owner.
var errLive = errors.New("ford: locked by a live transaction")

// lockRound CASes slot's lock word on every copy of r's shard from 0 to
// t's lock word, the primary's with a READ of the slot: one round trip.
// All or none: on a conflict the copies taken are released and the
// error is errLive, or (after recovering an expired owner) a
// LockConflict abort.
func (t *Tx) lockRound(r *rec, slot int) (object, error) {
	db, c, a := t.db, t.c, &t.db.arena
	if err := t.posting(); err != nil {
		return object{}, err
	}
	nodes := db.n
	reps := c.v.replicas(r.shard)
	var b byNode
	for i, n := range reps {
		off := db.lay.slotOff(n, r.shard, slot, nodes)
		b.add(n, c.cas(n, off+slotLock, a.results+8*i, 0, uint64(t.lock)))
		if i == 0 {
			b.add(n, c.read(n, off, a.window, db.lay.SlotSize()))
		}
	}
	if err := db.iss.round(t.ctx, c, b.lists); err != nil {
		// Some CASes may have taken their copy: release whatever holds
		// our word (a CAS, so nothing else is freed).
		t.unlockRec(r, slot)
		return object{}, roundErr(err, r.key)
	}
	var got []int
	var other lockWord
	for i := range reps {
		if w := c.word(a.results + 8*i); w == 0 {
			got = append(got, i)
		} else {
			other = lockWord(w)
		}
	}
	if len(got) < len(reps) {
		t.unlockCopies(r.shard, slot, got)
		if !other.expired(now(), db.cfg.Skew) {
			return object{}, errLive
		}
		if _, err := db.recoverLock(t.ctx, c.v, other, r.shard, slot); err != nil {
			return object{}, err
		}
		return object{}, txn.Abort(txn.LockConflict, r.key, nil)
	}
	s, ok := decodeSlot(c.buf[a.window:a.window+db.lay.SlotSize()], db.lay.ValueSize)
	if !ok {
		t.unlockCopies(r.shard, slot, got)
		return object{}, fmt.Errorf("%w: %q", errTorn, r.key)
	}
	s.value = bytes.Clone(s.value)
	s.key = bytes.Clone(s.key)
	return s, nil
}
