package rsexp

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
)

// timedStore is a client that keeps how long each of its successful
// Reads and Writes took, apart: YCSB's own latencies mix both kinds
// and include go-ycsb's making of the values written.
type timedStore struct {
	blockstore.Store
	mu            sync.Mutex
	reads, writes samples
}

// maxSamples bounds the latencies a client keeps of each kind between
// two takes; past it, new ones overwrite old ones.
const maxSamples = 1 << 16

// samples is a bounded set of latencies.
type samples struct {
	d []time.Duration
	n int // latencies offered since the last take
}

func (s *samples) add(d time.Duration) {
	if len(s.d) < maxSamples {
		s.d = append(s.d, d)
	} else {
		s.d[s.n%maxSamples] = d
	}
	s.n++
}

// Read implements blockstore.Store.
func (t *timedStore) Read(ctx context.Context, id uint64, dst []byte) ([]byte, error) {
	start := time.Now()
	b, err := t.Store.Read(ctx, id, dst)
	if err == nil {
		d := time.Since(start)
		t.mu.Lock()
		t.reads.add(d)
		t.mu.Unlock()
	}
	return b, err
}

// Write implements blockstore.Store.
func (t *timedStore) Write(ctx context.Context, id uint64, data []byte) error {
	start := time.Now()
	err := t.Store.Write(ctx, id, data)
	if err == nil {
		d := time.Since(start)
		t.mu.Lock()
		t.writes.add(d)
		t.mu.Unlock()
	}
	return err
}

// take returns the latencies kept since the last take and forgets them.
func (t *timedStore) take() (reads, writes []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	reads, writes = t.reads.d, t.writes.d
	t.reads, t.writes = samples{}, samples{}
	return reads, writes
}

// median returns the middle of ds (sorting it), or 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
