package farm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/txn"
)

// readEnt is a key the transaction read: where, at which version, and
// what it found.
type readEnt struct {
	shard   int
	slot    int  // -1: the key's window is full of other keys, it can never exist
	empty   bool // the slot was empty: the key was absent and would go there
	version uint64
	present bool
	locked  bool // at the READ
	value   []byte
}

// writeEnt is a buffered write.
type writeEnt struct {
	op      byte // opPut or opDelete
	value   []byte
	version uint64 // the version installed, once locked
}

// Tx is a FaRM transaction: reads by one-sided READs of the primaries,
// writes buffered until Commit (commit.go). It implements txn.Tx and
// txn.Traced.
type Tx struct {
	db     *DB
	ctx    context.Context
	conns  []*conn // at Commit: the connection to each node the commit uses (nil: none)
	info   txInfo  // at Commit: the shards written, the sessions used
	seq    uint64  // the transaction's number, once Commit gave it one
	reads  map[string]*readEnt
	writes map[string]*writeEnt
	done   bool
	traced bool
}

var _ txn.Traced = (*Tx)(nil)

// maxTorn bounds the READs of one object that found it torn.
const maxTorn = 1 << 14

// A READ that finds its object locked waits and reads again, pausing
// from lockPause doubling to maxLockPause, for at most maxLockWait; then
// the transaction aborts (lock conflict).
const (
	lockPause    = 2 * time.Microsecond
	maxLockPause = 200 * time.Microsecond
	maxLockWait  = 20 * time.Millisecond
)

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get implements txn.Tx.
func (t *Tx) Get(key []byte) ([]byte, error) {
	if err := t.usable(key, nil); err != nil {
		return nil, err
	}
	if w := t.writes[string(key)]; w != nil {
		if w.op == opDelete {
			return nil, txn.ErrNotFound
		}
		return bytes.Clone(w.value), nil
	}
	r, err := t.read(key)
	if err != nil {
		return nil, err
	}
	if !r.present {
		return nil, txn.ErrNotFound
	}
	return bytes.Clone(r.value), nil
}

// Put implements txn.Tx: a write, no read.
func (t *Tx) Put(key, value []byte) error {
	if err := t.usable(key, value); err != nil {
		return err
	}
	t.writes[string(key)] = &writeEnt{op: opPut, value: bytes.Clone(value)}
	return nil
}

// Insert implements txn.Tx: it reads the key (ErrExists at once when it
// has a record) and writes it.
func (t *Tx) Insert(key, value []byte) error {
	if err := t.usable(key, value); err != nil {
		return err
	}
	if _, err := t.Get(key); err == nil {
		return txn.ErrExists
	} else if err != txn.ErrNotFound {
		return err
	}
	t.writes[string(key)] = &writeEnt{op: opPut, value: bytes.Clone(value)}
	return nil
}

// Delete implements txn.Tx: it reads the key (ErrNotFound at once when
// it has no record) and deletes it.
func (t *Tx) Delete(key []byte) error {
	if err := t.usable(key, nil); err != nil {
		return err
	}
	if _, err := t.Get(key); err != nil {
		return err
	}
	t.writes[string(key)] = &writeEnt{op: opDelete}
	return nil
}

// Abort implements txn.Tx: nothing is locked before Commit, so there is
// nothing to undo.
func (t *Tx) Abort() { t.done = true }

// Trace implements txn.Traced: after Commit returned nil, the versions
// read and installed.
func (t *Tx) Trace() (reads, writes []txn.Access) {
	if !t.traced {
		return nil, nil
	}
	for k, r := range t.reads {
		reads = append(reads, txn.Access{Key: k, Version: r.version, Deleted: !r.present})
	}
	for k, w := range t.writes {
		writes = append(writes, txn.Access{Key: k, Version: w.version, Deleted: w.op == opDelete})
	}
	return reads, writes
}

// usable checks the transaction is open and the key and value in limits.
func (t *Tx) usable(key, value []byte) error {
	if t.done {
		return txn.ErrDone
	}
	if t.db.closed.Load() {
		return txn.ErrClosed
	}
	if err := txn.Check(key, value); err != nil {
		return err
	}
	if len(value) > t.db.layout.ValueSize {
		return fmt.Errorf("%w: a %d-byte value (this database's slots hold %d)", txn.ErrTooLarge, len(value), t.db.layout.ValueSize)
	}
	return nil
}

// read returns key's read entry, READing the key's primary the first
// time: the slot the client knows the key in, or else the first
// FirstProbe slots of the key's window, and the rest of the window when
// they all hold other keys. A torn object is read again.
func (t *Tx) read(key []byte) (*readEnt, error) {
	if r := t.reads[string(key)]; r != nil {
		return r, nil
	}
	db := t.db
	l := &db.layout
	shard := txn.Shard(key, l.Shards())
	c, err := db.conn(shard)
	if err != nil {
		return nil, readErr(key, err)
	}
	size, home := l.SlotSize(), l.home(txn.Hash(key))
	first, count := home, FirstProbe
	v, cached := db.locs.Load(string(key))
	if cached {
		first, count = v.(int), 1
	}
	var buf []byte
	var lockedSince time.Time
	wait := lockPause
	for torn := 0; ; torn++ {
		if torn > maxTorn {
			return nil, txn.Abort(txn.Timeout, key, fmt.Errorf("farm: %d torn reads in a row", torn))
		}
		if buf, err = c.read(t.ctx, c.tables+uint64(first*size), count*size, buf[:0]); err != nil {
			return nil, readErr(key, err)
		}
		r, ok := scan(buf, key, first, count, size, l.ValueSize)
		if !ok {
			runtime.Gosched()
			continue
		}
		switch {
		case r == nil && cached:
			// The known slot holds another key: cannot happen (keys
			// never move); look again from home.
			first, count, cached = home, FirstProbe, false
			continue
		case r == nil && first+count < home+MaxProbe: // the rest of the window
			first, count = first+count, home+MaxProbe-first-count
			torn = 0
			continue
		case r == nil: // the whole window holds other keys: key can never exist
			r = &readEnt{slot: -1}
		}
		if r.locked {
			// A writer holds it: it may have committed and not installed
			// yet. Wait for it, so that a transaction never reads what
			// one that committed before it began overwrote.
			if lockedSince.IsZero() {
				lockedSince = time.Now()
			} else if time.Since(lockedSince) > maxLockWait {
				return nil, txn.Abort(txn.LockConflict, key, nil)
			}
			if err := sleep(t.ctx, wait); err != nil {
				return nil, txn.Abort(txn.Timeout, key, err)
			}
			wait = min(2*wait, maxLockPause)
			torn = 0
			continue
		}
		r.shard = shard
		if r.slot >= 0 && !r.empty {
			db.locs.Store(string(key), r.slot)
		}
		t.reads[string(key)] = r
		return r, nil
	}
}

// readErr is the error of a READ that failed: an abort (Timeout), which
// the caller may retry once the client has reconnected, unless the
// client is closed.
func readErr(key []byte, err error) error {
	if errors.Is(err, txn.ErrClosed) {
		return err
	}
	return txn.Abort(txn.Timeout, key, err)
}

// scan looks for key in count slots READ from slot first on; ok false
// means a slot was torn. It returns nil when the slots end without
// deciding (all hold other keys).
func scan(buf, key []byte, first, count, size, valueSize int) (*readEnt, bool) {
	for i := range count {
		o, ok := decodeSlot(buf[i*size:(i+1)*size], valueSize)
		if !ok {
			return nil, false
		}
		switch {
		case o.klen == 0:
			return &readEnt{slot: first + i, empty: true, version: o.version()}, true
		case bytes.Equal(o.key, key):
			return &readEnt{slot: first + i, version: o.version(), present: o.present, locked: o.locked(), value: bytes.Clone(o.value)}, true
		}
	}
	return nil, true
}
