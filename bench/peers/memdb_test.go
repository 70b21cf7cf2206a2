package peers

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/rdmakit/rdmakit/txn"
)

// memDB is the simplest serializable txn.DB: a map, and one transaction
// at a time (Begin takes the lock, Commit or Abort gives it back). The
// SQL peers' tests run the workloads' own Exec on it as the reference
// their SQL must agree with.
type memDB struct {
	mu   sync.Mutex
	data map[string][]byte
}

func newMemDB() *memDB { return &memDB{data: map[string][]byte{}} }

func (d *memDB) Begin(ctx context.Context) (txn.Tx, error) {
	d.mu.Lock()
	return &memTx{d: d, writes: map[string][]byte{}}, nil
}

func (d *memDB) Close() error { return nil }

// memTx buffers writes (nil: deleted) until Commit.
type memTx struct {
	d      *memDB
	writes map[string][]byte
	done   bool
}

func (t *memTx) get(key []byte) ([]byte, bool) {
	if v, ok := t.writes[string(key)]; ok {
		return v, v != nil
	}
	v, ok := t.d.data[string(key)]
	return v, ok
}

func (t *memTx) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, txn.ErrDone
	}
	if v, ok := t.get(key); ok {
		return append([]byte(nil), v...), nil
	}
	return nil, fmt.Errorf("%w: %q", txn.ErrNotFound, key)
}

func (t *memTx) Put(key, value []byte) error {
	t.writes[string(key)] = append([]byte{}, value...)
	return nil
}

func (t *memTx) Insert(key, value []byte) error {
	if _, ok := t.get(key); ok {
		return fmt.Errorf("%w: %q", txn.ErrExists, key)
	}
	return t.Put(key, value)
}

func (t *memTx) Delete(key []byte) error {
	if _, ok := t.get(key); !ok {
		return fmt.Errorf("%w: %q", txn.ErrNotFound, key)
	}
	t.writes[string(key)] = nil
	return nil
}

func (t *memTx) Commit() error {
	if t.done {
		return txn.ErrDone
	}
	for k, v := range t.writes {
		if v == nil {
			delete(t.d.data, k)
		} else {
			t.d.data[k] = v
		}
	}
	t.end()
	return nil
}

func (t *memTx) Abort() {
	if !t.done {
		t.end()
	}
}

func (t *memTx) end() {
	t.done = true
	t.d.mu.Unlock()
}

// snapshot returns a copy of the data.
func (d *memDB) snapshot() map[string][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.data)
}
