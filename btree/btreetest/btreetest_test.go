package btreetest

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/btree"
)

// memTree is a btree.Tree in a sorted slice under a mutex; with
// dropEvery n it silently drops every n-th Put, with staleScan its scans
// skip the first key.
type memTree struct {
	mu        sync.Mutex
	keys      [][]byte
	vals      map[string][]byte
	puts      int
	dropEvery int
	staleScan bool
}

func newMemTree() *memTree { return &memTree{vals: map[string][]byte{}} }

func (m *memTree) Get(_ context.Context, key, dst []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[string(key)]
	if !ok {
		return dst, btree.ErrNotFound
	}
	return append(dst, v...), nil
}

func (m *memTree) Put(_ context.Context, key, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.puts++; m.dropEvery > 0 && m.puts%m.dropEvery == 0 {
		return nil
	}
	if _, ok := m.vals[string(key)]; !ok {
		i, _ := slices.BinarySearchFunc(m.keys, key, bytes.Compare)
		m.keys = slices.Insert(m.keys, i, bytes.Clone(key))
	}
	m.vals[string(key)] = bytes.Clone(value)
	return nil
}

func (m *memTree) Delete(_ context.Context, key []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, ok := slices.BinarySearchFunc(m.keys, key, bytes.Compare); ok {
		m.keys = slices.Delete(m.keys, i, i+1)
		delete(m.vals, string(key))
	}
	return nil
}

func (m *memTree) Scan(_ context.Context, from, to []byte, limit int) btree.Iterator {
	m.mu.Lock()
	defer m.mu.Unlock()
	it := &memIter{i: -1}
	for _, k := range m.keys {
		if (from == nil || bytes.Compare(k, from) >= 0) && (to == nil || bytes.Compare(k, to) < 0) && (limit <= 0 || len(it.k) < limit) {
			it.k, it.v = append(it.k, k), append(it.v, m.vals[string(k)])
		}
	}
	if m.staleScan && len(it.k) > 0 {
		it.k, it.v = it.k[1:], it.v[1:]
	}
	return it
}

func (m *memTree) Close() error { return nil }

type memIter struct {
	k, v [][]byte
	i    int
}

func (it *memIter) Next() bool    { it.i++; return it.i < len(it.k) }
func (it *memIter) Key() []byte   { return it.k[it.i] }
func (it *memIter) Value() []byte { return it.v[it.i] }
func (it *memIter) Err() error    { return nil }
func (it *memIter) Close() error  { return nil }

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// fails runs check with a recorder on its own goroutine and reports
// whether it failed.
func fails(t *testing.T, check func(testing.TB)) (bool, string) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failed, r.msg
}

// TestChecksPassACorrectTree: a correct tree passes both checks.
func TestChecksPassACorrectTree(t *testing.T) {
	Oracle(t, newMemTree(), 3000, 20, 1)
	m := newMemTree()
	Linearizable(t, []btree.Tree{m, m}, 3, 3000, 16)
}

// TestChecksCatchBugs: lost writes and scans that skip a key fail the
// checks.
func TestChecksCatchBugs(t *testing.T) {
	if ok, msg := fails(t, func(tb testing.TB) { Oracle(tb, &memTree{vals: map[string][]byte{}, dropEvery: 7}, 3000, 20, 1) }); !ok {
		t.Error("Oracle passed a tree that drops writes")
	} else {
		t.Logf("lost writes: %s", msg)
	}
	if ok, _ := fails(t, func(tb testing.TB) { Oracle(tb, &memTree{vals: map[string][]byte{}, staleScan: true}, 3000, 20, 1) }); !ok {
		t.Error("Oracle passed a tree whose scans skip a key")
	}
	if ok, _ := fails(t, func(tb testing.TB) {
		m := &memTree{vals: map[string][]byte{}, dropEvery: 5}
		Linearizable(tb, []btree.Tree{m, m}, 3, 3000, 16)
	}); !ok {
		t.Error("Linearizable passed a tree that drops writes")
	}
}
