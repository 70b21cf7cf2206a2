package workload_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/workload"
)

// mapStore is a kv.Store in a map, counting operations.
type mapStore struct {
	mu         sync.Mutex
	m          map[string][]byte
	gets, puts int
}

func (s *mapStore) Get(_ context.Context, key, dst []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	v, ok := s.m[string(key)]
	if !ok {
		return dst, kv.ErrNotFound
	}
	return append(dst, v...), nil
}

func (s *mapStore) Put(_ context.Context, key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	s.m[string(key)] = append([]byte(nil), value...)
	return nil
}

func (s *mapStore) Delete(_ context.Context, key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, string(key))
	return nil
}

func (s *mapStore) Close() error { return nil }

func TestYCSB(t *testing.T) {
	for _, tc := range []struct {
		w            string
		dist         string
		reads, write bool
	}{{"a", "zipfian", true, true}, {"b", "uniform", true, true}, {"c", "zipfian", true, false}, {"d", "", true, true}, {"f", "uniform", true, true}} {
		t.Run(tc.w, func(t *testing.T) {
			s := &mapStore{m: map[string][]byte{}}
			y := workload.YCSB{Workload: tc.w, Distribution: tc.dist, Records: 500, ValueSize: 64, Threads: 4, Duration: 100 * time.Millisecond}
			dbs := []ycsb.DB{workload.DB{Store: s}, workload.DB{Store: s}}
			wl, err := y.Load(context.Background(), dbs)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.m) != 500 || s.puts != 500 {
				t.Fatalf("loaded %d keys with %d puts, want 500", len(s.m), s.puts)
			}
			for k, v := range s.m {
				if len(v) != 64 {
					t.Fatalf("%s: a %d-byte value", k, len(v))
				}
			}
			s.puts = 0
			r, err := y.Run(context.Background(), wl, dbs)
			if err != nil || r.Ops == 0 || r.Errors != 0 {
				t.Fatalf("run: %+v, %v", r, err)
			}
			if (s.gets > 0) != tc.reads || (s.puts > 0) != tc.write {
				t.Errorf("workload %s: %d gets, %d puts", tc.w, s.gets, s.puts)
			}
			if r.P50 <= 0 || r.P99 < r.P50 || r.Rate() <= 0 {
				t.Errorf("latencies %v / %v, rate %v", r.P50, r.P99, r.Rate())
			}
		})
	}
	y := workload.YCSB{Workload: "e", Records: 10, ValueSize: 8}
	if _, err := y.Load(context.Background(), []ycsb.DB{workload.DB{Store: &mapStore{m: map[string][]byte{}}}}); err == nil {
		t.Error("workload e (scans) was accepted")
	}
	if _, err := (workload.DB{}).Scan(context.Background(), "", "", 1, nil); !errors.Is(err, workload.ErrNoScan) {
		t.Errorf("scan: %v", err)
	}
}

// TestReadAllocatesNothing: a thread's GETs go through its own buffers
// (the key, the value and the record), so the adapter adds no allocation
// to any store's GET; the record holds the value read.
func TestReadAllocatesNothing(t *testing.T) {
	s := &mapStore{m: map[string][]byte{"user1": []byte("value-1")}}
	db := workload.DB{Store: s}
	ctx := db.InitThread(context.Background(), 0, 1)
	n := testing.AllocsPerRun(100, func() {
		rec, err := db.Read(ctx, "usertable", "user1", nil)
		if err != nil || string(rec["field0"]) != "value-1" || len(rec) != 1 {
			t.Fatalf("read %q, %v", rec, err)
		}
	})
	if n != 0 {
		t.Fatalf("Read allocates %v times", n)
	}
	if _, err := db.Read(ctx, "usertable", "user2", nil); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("a missing key: %v", err)
	}
	// Without InitThread's buffers a Read still works.
	if rec, err := db.Read(context.Background(), "usertable", "user1", nil); err != nil || string(rec["field0"]) != "value-1" {
		t.Fatalf("read %q, %v", rec, err)
	}
}
