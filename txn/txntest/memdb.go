package txntest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/txn"
)

// MemDB is an in-process txn.DB for tests: optimistic concurrency
// control over a map. A transaction reads committed records (each key
// once: a second read returns what the first saw), buffers its writes,
// and at Commit, under the map's lock, checks that every record it read
// still has the version it read (backward validation) before it
// installs its writes, each as the record's next version. Validation and
// installation happen at one instant, so committed transactions are
// serializable in commit order. Its Tx implements txn.Traced.
//
// With Unvalidated it skips the validation: snapshot reads, then a blind
// install. That is not serializable (lost updates, write skew): it is
// the negative control the serializability checker must catch.
type MemDB struct {
	mu          sync.Mutex
	recs        map[string]*record
	closed      atomic.Bool
	unvalidated bool
}

// record is one key's committed state.
type record struct {
	value   []byte
	version uint64 // of the last write; 0 before any
	present bool
}

// Option configures a MemDB.
type Option func(*MemDB)

// Unvalidated makes Commit skip the validation of reads: the
// non-serializable negative control.
func Unvalidated() Option { return func(d *MemDB) { d.unvalidated = true } }

// NewMemDB returns an empty MemDB.
func NewMemDB(opts ...Option) *MemDB {
	d := &MemDB{recs: map[string]*record{}}
	for _, o := range opts {
		o(d)
	}
	return d
}

var _ txn.DB = (*MemDB)(nil)

// Begin starts a transaction bounded by ctx.
func (d *MemDB) Begin(ctx context.Context) (txn.Tx, error) {
	if d.closed.Load() {
		return nil, txn.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, txn.Abort(txn.Timeout, nil, err)
	}
	return &memTx{db: d, ctx: ctx, reads: map[string]int{}, writes: map[string]int{}}, nil
}

// Close makes every later call fail with txn.ErrClosed, transactions
// under way included. It does not wait: nothing in a MemDB blocks.
func (d *MemDB) Close() error {
	d.closed.Store(true)
	return nil
}

// memTx is a MemDB transaction.
type memTx struct {
	db   *MemDB
	ctx  context.Context
	done bool
	// The records read, in order (the trace), and their values; reads
	// indexes them by key.
	readSet  []txn.Access
	readVals [][]byte
	reads    map[string]int
	// The buffered writes, in order; writes indexes them by key. After
	// Commit, writeSet[i].Version is the version installed.
	writeSet  []txn.Access
	writeVals [][]byte
	writes    map[string]int
}

var (
	_ txn.Tx     = (*memTx)(nil)
	_ txn.Traced = (*memTx)(nil)
)

// usable returns the error that ends an operation before it starts: a
// finished transaction, a closed DB, or the context's end (which aborts
// the transaction).
func (t *memTx) usable(key []byte) error {
	switch {
	case t.done:
		return txn.ErrDone
	case t.db.closed.Load():
		t.done = true
		return txn.ErrClosed
	case t.ctx.Err() != nil:
		t.done = true
		return txn.Abort(txn.Timeout, key, t.ctx.Err())
	}
	return nil
}

// read returns key's value as the transaction sees it: its own write,
// or the committed record (read once, recorded in the read set).
func (t *memTx) read(key string) (value []byte, present bool) {
	if i, ok := t.writes[key]; ok {
		return t.writeVals[i], !t.writeSet[i].Deleted
	}
	if i, ok := t.reads[key]; ok {
		return t.readVals[i], !t.readSet[i].Deleted
	}
	t.db.mu.Lock()
	r := t.db.recs[key]
	a := txn.Access{Key: key, Deleted: true}
	if r != nil {
		a.Version, a.Deleted, value = r.version, !r.present, r.value
	}
	t.db.mu.Unlock()
	t.reads[key] = len(t.readSet)
	t.readSet = append(t.readSet, a)
	t.readVals = append(t.readVals, value)
	return value, !a.Deleted
}

// write buffers a write of key (a delete when del).
func (t *memTx) write(key string, value []byte, del bool) {
	if !del {
		value = append([]byte(nil), value...)
	}
	if i, ok := t.writes[key]; ok {
		t.writeVals[i], t.writeSet[i].Deleted = value, del
		return
	}
	t.writes[key] = len(t.writeSet)
	t.writeSet = append(t.writeSet, txn.Access{Key: key, Deleted: del})
	t.writeVals = append(t.writeVals, value)
}

// Get returns key's value.
func (t *memTx) Get(key []byte) ([]byte, error) {
	if err := txn.Check(key, nil); err != nil {
		return nil, err
	}
	if err := t.usable(key); err != nil {
		return nil, err
	}
	v, ok := t.read(string(key))
	if !ok {
		return nil, fmt.Errorf("%w: %q", txn.ErrNotFound, key)
	}
	return append([]byte(nil), v...), nil
}

// Put buffers a write of key.
func (t *memTx) Put(key, value []byte) error {
	if err := txn.Check(key, value); err != nil {
		return err
	}
	if err := t.usable(key); err != nil {
		return err
	}
	t.write(string(key), value, false)
	return nil
}

// Insert buffers a write of key, which must have no record.
func (t *memTx) Insert(key, value []byte) error {
	if err := txn.Check(key, value); err != nil {
		return err
	}
	if err := t.usable(key); err != nil {
		return err
	}
	if _, ok := t.read(string(key)); ok {
		return fmt.Errorf("%w: %q", txn.ErrExists, key)
	}
	t.write(string(key), value, false)
	return nil
}

// Delete buffers the removal of key, which must have a record.
func (t *memTx) Delete(key []byte) error {
	if err := txn.Check(key, nil); err != nil {
		return err
	}
	if err := t.usable(key); err != nil {
		return err
	}
	if _, ok := t.read(string(key)); !ok {
		return fmt.Errorf("%w: %q", txn.ErrNotFound, key)
	}
	t.write(string(key), nil, true)
	return nil
}

// Abort drops the transaction.
func (t *memTx) Abort() { t.done = true }

// Commit validates the reads (unless the DB is Unvalidated) and installs
// the writes, at one instant.
func (t *memTx) Commit() error {
	if err := t.usable(nil); err != nil {
		return err
	}
	t.done = true
	d := t.db
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.unvalidated {
		for _, a := range t.readSet {
			if r := d.recs[a.Key]; r != nil && r.version != a.Version {
				return txn.Abort(txn.ValidationFailed, []byte(a.Key), nil)
			}
		}
	}
	for i := range t.writeSet {
		w := &t.writeSet[i]
		r := d.recs[w.Key]
		if r == nil {
			r = &record{}
			d.recs[w.Key] = r
		}
		r.version++
		r.value, r.present = t.writeVals[i], !w.Deleted
		w.Version = r.version
	}
	return nil
}

// Trace returns the versions read and installed (valid after Commit
// returned nil).
func (t *memTx) Trace() (reads, writes []txn.Access) { return t.readSet, t.writeSet }
