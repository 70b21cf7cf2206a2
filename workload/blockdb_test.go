package workload_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/workload"
)

// blockMap is a blockstore.Store in a map, counting operations per
// block.
type blockMap struct {
	mu            sync.Mutex
	l             blockstore.Layout
	m             map[uint64][]byte
	reads, writes map[uint64]int
}

func newBlockMap(size int, blocks uint64) *blockMap {
	return &blockMap{l: blockstore.Layout{BlockSize: size, Blocks: blocks, Replicas: []string{"m"}},
		m: map[uint64][]byte{}, reads: map[uint64]int{}, writes: map[uint64]int{}}
}

func (s *blockMap) Read(_ context.Context, id uint64, dst []byte) ([]byte, error) {
	if err := s.l.CheckOp(id, -1); err != nil {
		return dst, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[id]++
	if v, ok := s.m[id]; ok {
		return append(dst, v...), nil
	}
	return append(dst, make([]byte, s.l.BlockSize)...), nil
}

func (s *blockMap) Write(_ context.Context, id uint64, data []byte) error {
	if err := s.l.CheckOp(id, len(data)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes[id]++
	s.m[id] = append([]byte(nil), data...)
	return nil
}

func (s *blockMap) Layout() blockstore.Layout { return s.l }
func (s *blockMap) Close() error              { return nil }

func TestBlockDB(t *testing.T) {
	for _, tc := range []struct {
		w, dist       string
		reads, writes bool
	}{{"a", "zipfian", true, true}, {"b", "uniform", true, true}, {"c", "zipfian", true, false}} {
		t.Run(tc.w+"-"+tc.dist, func(t *testing.T) {
			const blocks, size = 300, 512
			s := newBlockMap(size, blocks+1) // zipfian keys reach record 300

			y := workload.YCSB{Workload: tc.w, Distribution: tc.dist, Records: blocks, ValueSize: size, Threads: 4,
				Duration: 100 * time.Millisecond, OrderedKeys: true}
			dbs := []ycsb.DB{workload.BlockDB{Store: s}, workload.BlockDB{Store: s}}
			wl, err := y.Load(context.Background(), dbs)
			if err != nil {
				t.Fatal(err)
			}
			// Loading writes every block once: record N is block N.
			if len(s.m) != blocks {
				t.Fatalf("loaded %d blocks, want %d", len(s.m), blocks)
			}
			for id := range uint64(blocks) {
				if s.writes[id] != 1 || len(s.m[id]) != size {
					t.Fatalf("block %d: %d writes, %d bytes", id, s.writes[id], len(s.m[id]))
				}
			}
			clear(s.writes)
			r, err := y.Run(context.Background(), wl, dbs)
			if err != nil || r.Ops == 0 || r.Errors != 0 {
				t.Fatalf("run: %+v, %v", r, err)
			}
			if (len(s.reads) > 0) != tc.reads || (len(s.writes) > 0) != tc.writes {
				t.Errorf("workload %s: %d blocks read, %d written", tc.w, len(s.reads), len(s.writes))
			}
			// Uniform keys reach most blocks; zipfian keys favour a few.
			if tc.dist == "uniform" && len(s.reads) < blocks/2 {
				t.Errorf("uniform reads reached %d of %d blocks", len(s.reads), blocks)
			}
			if tc.dist == "uniform" && (s.reads[blocks] > 0 || s.writes[blocks] > 0) {
				t.Errorf("uniform keys reached block %d, past the records", blocks)
			}
			total, top := 0, 0
			for _, n := range s.reads {
				total, top = total+n, max(top, n)
			}
			if hot := top * blocks / total; tc.dist == "zipfian" && hot < 5 || tc.dist == "uniform" && hot >= 5 {
				t.Errorf("%s: the most read block had %d× the mean reads", tc.dist, hot)
			}
		})
	}
}

func TestBlockDBHashedKeys(t *testing.T) {
	s := newBlockMap(512, 100)
	y := workload.YCSB{Workload: "c", Records: 100, ValueSize: 512} // hashed keys: no block ids
	if _, err := y.Load(context.Background(), []ycsb.DB{workload.BlockDB{Store: s}}); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("load with hashed keys: %v, want ErrOutOfRange", err)
	}
	if _, err := workload.BlockID("user12x"); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("BlockID(user12x): %v", err)
	}
	if id, err := workload.BlockID("user42"); id != 42 || err != nil {
		t.Errorf("BlockID(user42) = %d, %v", id, err)
	}
	db := workload.BlockDB{Store: s}
	if err := db.Delete(context.Background(), "", "user1"); !errors.Is(err, workload.ErrNoDelete) {
		t.Errorf("Delete: %v, want ErrNoDelete", err)
	}
}
