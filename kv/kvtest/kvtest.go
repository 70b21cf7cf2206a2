// Package kvtest checks any kv.Store: single-client semantics (Basic) and
// linearizability of concurrent histories with porcupine (Linearizable).
// Every design's tests run both, on several transports and with faults.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/kv"
)

// Basic checks s's semantics from one client: missing keys, put and get,
// overwrite with a longer and a shorter value, delete, binary keys, the
// size limits and their typed errors, and many keys.
func Basic(t *testing.T, s kv.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := func(key string) (string, error) {
		v, err := s.Get(ctx, []byte(key), nil)
		return string(v), err
	}
	if _, err := get("missing"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get of a missing key: %v, want ErrNotFound", err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(ctx, []byte("k"), []byte("v1")))
	if v, err := get("k"); err != nil || v != "v1" {
		t.Fatalf("get after put: %q, %v", v, err)
	}
	long := string(bytes.Repeat([]byte("L"), 5000))
	must(s.Put(ctx, []byte("k"), []byte(long)))
	if v, err := get("k"); err != nil || v != long {
		t.Fatalf("get after a longer overwrite: %d bytes, %v", len(v), err)
	}
	must(s.Put(ctx, []byte("k"), []byte("s")))
	if v, err := get("k"); err != nil || v != "s" {
		t.Fatalf("get after a shorter overwrite: %q, %v", v, err)
	}
	must(s.Put(ctx, []byte("empty"), nil))
	if v, err := get("empty"); err != nil || v != "" {
		t.Fatalf("an empty value: %q, %v", v, err)
	}
	must(s.Delete(ctx, []byte("k")))
	if _, err := get("k"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	must(s.Delete(ctx, []byte("k"))) // deleting a missing key is fine
	must(s.Put(ctx, []byte("k"), []byte("again")))
	if v, err := get("k"); err != nil || v != "again" {
		t.Fatalf("put after delete: %q, %v", v, err)
	}
	bin := []byte{0, 1, 2, 0xff, 0}
	must(s.Put(ctx, bin, bin))
	if v, err := s.Get(ctx, bin, []byte("prefix:")); err != nil || !bytes.Equal(v, append([]byte("prefix:"), bin...)) {
		t.Fatalf("binary key, appended to dst: %q, %v", v, err)
	}
	maxKey, maxVal := bytes.Repeat([]byte("k"), kv.MaxKey), bytes.Repeat([]byte("v"), kv.MaxValue)
	must(s.Put(ctx, maxKey, maxVal))
	if v, err := s.Get(ctx, maxKey, nil); err != nil || !bytes.Equal(v, maxVal) {
		t.Fatalf("largest key and value: %d bytes, %v", len(v), err)
	}
	for _, tc := range []struct {
		name       string
		key, value []byte
	}{{"key too long", make([]byte, kv.MaxKey+1), nil}, {"value too long", []byte("x"), make([]byte, kv.MaxValue+1)}, {"empty key", nil, nil}} {
		if err := s.Put(ctx, tc.key, tc.value); !errors.Is(err, kv.ErrTooLarge) {
			t.Errorf("put, %s: %v, want ErrTooLarge", tc.name, err)
		}
		if tc.value == nil {
			if _, err := s.Get(ctx, tc.key, nil); !errors.Is(err, kv.ErrTooLarge) {
				t.Errorf("get, %s: %v, want ErrTooLarge", tc.name, err)
			}
		}
	}
	const many = 2000
	for i := 0; i < many; i++ {
		must(s.Put(ctx, []byte(fmt.Sprintf("key-%d", i)), []byte(fmt.Sprintf("value-%d", i))))
	}
	for i := 0; i < many; i++ {
		if v, err := get(fmt.Sprintf("key-%d", i)); err != nil || v != fmt.Sprintf("value-%d", i) {
			t.Fatalf("key-%d of %d: %q, %v", i, many, v, err)
		}
	}
	for i := 0; i < many; i += 2 {
		must(s.Delete(ctx, []byte(fmt.Sprintf("key-%d", i))))
	}
	for i := 0; i < many; i++ {
		v, err := get(fmt.Sprintf("key-%d", i))
		if i%2 == 0 && !errors.Is(err, kv.ErrNotFound) || i%2 == 1 && (err != nil || v != fmt.Sprintf("value-%d", i)) {
			t.Fatalf("key-%d after deleting the even ones: %q, %v", i, v, err)
		}
	}
}

// LinConfig shapes a linearizability run.
type LinConfig struct {
	// Ops is the total number of operations (default 10,000).
	Ops int
	// Keys is the number of distinct keys (default 8: contention).
	Keys int
	// OpTimeout bounds each operation (default 5 s); an operation that
	// times out counts as unknown (a Put or Delete) or is dropped (a Get).
	OpTimeout time.Duration
	// Faults, when set, runs during the operations until stop closes.
	Faults func(stop <-chan struct{})
	// Cancel is the fraction of operations (0 to 1) whose context is
	// cancelled at a random point while they run: within CancelWithin
	// (default 300 µs) of their start. A cancelled PUT or DELETE counts
	// as unknown, a cancelled GET is dropped.
	Cancel       float64
	CancelWithin time.Duration
	// Churn deletes and re-inserts keys without end: the Keys keys in
	// play move on by Keys/2 every 32 operations of a client, which
	// deletes the keys it leaves behind, and 30% of the other operations
	// are deletes too. The store sees far more distinct keys over the run
	// than it holds at once (at most about 6·Keys with 4 clients). Any
	// kv.ErrFull fails the test: a deleted key's room must come back.
	Churn bool
}

// Linearizable runs cfg.Ops random operations (half gets, 40% puts, 10%
// deletes) from one goroutine per store in stores, all on a few keys,
// records the history and checks it with porcupine. It fails the test
// when the history is not linearizable, and reports how many operations
// failed.
func Linearizable(t *testing.T, stores []kv.Store, cfg LinConfig) {
	t.Helper()
	if cfg.Ops <= 0 {
		cfg.Ops = 10000
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 8
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	if cfg.CancelWithin <= 0 {
		cfg.CancelWithin = 300 * time.Microsecond
	}
	h := check.NewKVHistory()
	stop := make(chan struct{})
	var faults sync.WaitGroup
	if cfg.Faults != nil {
		faults.Add(1)
		go func() { defer faults.Done(); cfg.Faults(stop) }()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	per := cfg.Ops / len(stores)
	for ci, s := range stores {
		wg.Add(1)
		go func(ci int, s kv.Store) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(ci) + 1))
			var buf []byte
			for i := 0; i < per; i++ {
				key := fmt.Sprintf("k%d", rng.Intn(cfg.Keys))
				leave := cfg.Churn && i%32 == 31
				if cfg.Churn {
					key = fmt.Sprintf("k%d", i/32*max(cfg.Keys/2, 1)+rng.Intn(cfg.Keys))
				}
				ctx, cancel := context.WithTimeout(context.Background(), cfg.OpTimeout)
				var timer *time.Timer
				if cfg.Cancel > 0 && rng.Float64() < cfg.Cancel {
					timer = time.AfterFunc(time.Duration(rng.Int63n(int64(cfg.CancelWithin))), cancel)
				}
				call := h.Now()
				var in check.KVInput
				var out check.KVOutput
				var err error
				gets, puts := 5, 9
				if cfg.Churn {
					gets, puts = 4, 7
				}
				switch r := rng.Intn(10); {
				case r < gets:
					in = check.KVInput{Kind: check.KVGet, Key: key}
					buf, err = s.Get(ctx, []byte(key), buf[:0])
					if err == nil {
						out = check.KVOutput{Value: string(buf), Found: true}
					} else if errors.Is(err, kv.ErrNotFound) {
						err = nil
					}
				case r < puts:
					in = check.KVInput{Kind: check.KVPut, Key: key, Value: fmt.Sprintf("%d.%d", ci, i)}
					err = s.Put(ctx, []byte(key), []byte(in.Value))
				default:
					in = check.KVInput{Kind: check.KVDelete, Key: key}
					err = s.Delete(ctx, []byte(key))
				}
				ret := h.Now()
				if timer != nil {
					timer.Stop()
				}
				cancel()
				if leave {
					churnLeave(s, h, ci, i/32*max(cfg.Keys/2, 1), cfg)
				}
				if err != nil {
					if cfg.Churn && errors.Is(err, kv.ErrFull) {
						t.Errorf("client %d, operation %d (%v %s): %v", ci, i, in.Kind, key, err)
					}
					mu.Lock()
					failed[err.Error()]++
					mu.Unlock()
					if in.Kind == check.KVGet {
						continue
					}
				}
				h.Add(ci, in, out, call, ret, err != nil)
			}
		}(ci, s)
	}
	wg.Wait()
	close(stop)
	faults.Wait()
	res, info := h.Check(2 * time.Minute)
	n := 0
	for _, c := range failed {
		n += c
	}
	t.Logf("%d operations recorded, %d failed %v: %v", h.Len(), n, failed, res)
	switch res {
	case porcupine.Illegal:
		t.Errorf("the history is not linearizable")
		if path := t.TempDir() + "/history.html"; porcupine.VisualizePath(check.KVModel, info, path) == nil {
			t.Logf("visualization: %s", path)
		}
	case porcupine.Unknown:
		t.Errorf("the checker ran out of time")
	}
	if h.Len() < cfg.Ops/2 {
		t.Errorf("only %d of %d operations succeeded", h.Len(), cfg.Ops)
	}
}

// CloseWithin closes s and fails the test when Close has not returned
// within d (it then leaves it running).
func CloseWithin(t testing.TB, s kv.Store, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("Close has not returned after %v", d)
	}
}

// churnLeave deletes the Keys keys from first on that a churning client
// leaves behind, recording each delete.
func churnLeave(s kv.Store, h *check.KVHistory, ci, first int, cfg LinConfig) {
	for k := first; k < first+cfg.Keys; k++ {
		key := fmt.Sprintf("k%d", k)
		ctx, cancel := context.WithTimeout(context.Background(), cfg.OpTimeout)
		call := h.Now()
		err := s.Delete(ctx, []byte(key))
		ret := h.Now()
		cancel()
		h.Add(ci, check.KVInput{Kind: check.KVDelete, Key: key}, check.KVOutput{}, call, ret, err != nil)
	}
}
