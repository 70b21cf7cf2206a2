// Package btreetest checks any btree.Tree the same way: Linearizable
// runs concurrent Gets, Puts and Deletes from several clients and checks
// the history with porcupine (check.KVModel, per key); Oracle runs a
// random sequence of operations and scans on one client against a
// sorted map. The peers of btree/sherman (btree/rpctree, the Redis
// sorted set of bench/peers) use it in their tests.
package btreetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/check"
)

// RandomOp runs the i-th operation of client id on c and records it in
// h: 50% Get, 40% Put, 10% Delete of one of keys keys from i/8 on (a
// window that drifts with i, so new keys keep coming while each key sees
// contention). It returns the operation as h recorded it, or the error
// of an operation that failed (not recorded).
func RandomOp(ctx context.Context, c btree.Tree, h *check.KVHistory, r *rand.Rand, id, i, keys int) (porcupine.Operation, error) {
	key := fmt.Sprintf("key%05d", i/8+r.IntN(keys))
	var in check.KVInput
	var out check.KVOutput
	var err error
	call := h.Now()
	switch x := r.IntN(10); {
	case x < 5:
		in = check.KVInput{Kind: check.KVGet, Key: key}
		var v []byte
		v, err = c.Get(ctx, []byte(key), nil)
		if errors.Is(err, btree.ErrNotFound) {
			err = nil
		} else if err == nil {
			out = check.KVOutput{Value: string(v), Found: true}
		}
	case x < 9:
		in = check.KVInput{Kind: check.KVPut, Key: key, Value: fmt.Sprintf("%d.%d", id, i)}
		err = c.Put(ctx, []byte(key), []byte(in.Value))
	default:
		in = check.KVInput{Kind: check.KVDelete, Key: key}
		err = c.Delete(ctx, []byte(key))
	}
	ret := h.Now()
	if err != nil {
		return porcupine.Operation{}, fmt.Errorf("%v %q: %w", in.Kind, key, err)
	}
	h.Add(id, in, out, call, ret, false)
	return porcupine.Operation{ClientId: id, Input: in, Output: out, Call: call, Return: ret}, nil
}

// Linearizable runs ops operations spread over tasks goroutines per
// client of clients (50% Get, 40% Put, 10% Delete on keys keys, each
// task drifting over the key space) and fails t unless the history is
// linearizable.
func Linearizable(t testing.TB, clients []btree.Tree, tasks, ops, keys int) {
	t.Helper()
	ctx := context.Background()
	h := check.NewKVHistory()
	var wg sync.WaitGroup
	per := ops / (len(clients) * tasks)
	for p, c := range clients {
		for k := range tasks {
			id := p*tasks + k
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(id), 11))
				for i := range per {
					if _, err := RandomOp(ctx, c, h, r, id, i, keys); err != nil {
						t.Errorf("task %d: %v", id, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if res, _ := h.Check(time.Minute); res != porcupine.Ok {
		t.Errorf("history of %d operations: %v", h.Len(), res)
	}
}

// Oracle runs ops random operations on tr — Put, Delete, Get and
// bounded and unbounded Scans with limits — and compares every answer
// with a sorted map's. Keys are "k" and 3 digits; values vary in length
// up to maxValue.
func Oracle(t testing.TB, tr btree.Tree, ops, maxValue int, seed uint64) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 3))
	want := map[string]string{}
	key := func() string { return fmt.Sprintf("k%03d", r.IntN(400)) }
	for i := range ops {
		switch x := r.IntN(20); {
		case x < 8:
			k, v := key(), string(bytes.Repeat([]byte{byte('a' + i%26)}, r.IntN(maxValue+1)))
			if err := tr.Put(ctx, []byte(k), []byte(v)); err != nil {
				t.Fatalf("op %d: put %q: %v", i, k, err)
			}
			want[k] = v
		case x < 11:
			k := key()
			if err := tr.Delete(ctx, []byte(k)); err != nil {
				t.Fatalf("op %d: delete %q: %v", i, k, err)
			}
			delete(want, k)
		case x < 17:
			k := key()
			v, err := tr.Get(ctx, []byte(k), nil)
			w, ok := want[k]
			switch {
			case !ok && !errors.Is(err, btree.ErrNotFound):
				t.Fatalf("op %d: get %q = %q, %v; want ErrNotFound", i, k, v, err)
			case ok && (err != nil || string(v) != w):
				t.Fatalf("op %d: get %q = %q, %v; want %q", i, k, v, err, w)
			}
		default:
			var from, to []byte
			if r.IntN(3) > 0 {
				from = []byte(key())
			}
			if r.IntN(3) > 0 {
				to = []byte(key())
			}
			limit := r.IntN(3) * 50
			checkScan(t, tr, want, from, to, limit, i)
		}
	}
	checkScan(t, tr, want, nil, nil, 0, ops)
}

// checkScan compares one Scan with the map.
func checkScan(t testing.TB, tr btree.Tree, want map[string]string, from, to []byte, limit, op int) {
	t.Helper()
	var keys []string
	for k := range want {
		if (from == nil || k >= string(from)) && (to == nil || k < string(to)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	it := tr.Scan(context.Background(), from, to, limit)
	defer it.Close()
	var got []string
	for it.Next() {
		k := string(it.Key())
		if w, ok := want[k]; !ok || w != string(it.Value()) {
			t.Fatalf("op %d: scan [%q, %q) limit %d: %q = %q; want %q (present %v)", op, from, to, limit, k, it.Value(), w, ok)
		}
		got = append(got, k)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("op %d: scan [%q, %q): %v", op, from, to, err)
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("op %d: scan [%q, %q) limit %d: %d keys %v; want %d %v", op, from, to, limit, len(got), got, len(keys), keys)
	}
}
