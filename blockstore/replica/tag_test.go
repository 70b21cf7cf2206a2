package replica_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
)

// TestIssuer: tags order by timestamp then id; an issuer goes above the
// latest tag, never issues one tag twice for a block, even to writes that
// read the same latest tag at once, and refuses exhausted timestamps.
func TestIssuer(t *testing.T) {
	if a, b := replica.MakeTag(1, 1<<32-1), replica.MakeTag(2, 0); a >= b || a.TS() != 1 || a.ID() != 1<<32-1 || b.TS() != 2 {
		t.Fatalf("%v ≥ %v", a, b)
	}
	var is replica.Issuer
	latest := replica.MakeTag(41, 9)
	seen := map[replica.Tag]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tag, err := is.Next(5, latest, 3)
				mu.Lock()
				if err != nil || tag <= latest || seen[tag] || tag.ID() != 3 {
					t.Errorf("%v, %v (latest %v)", tag, err, latest)
				}
				seen[tag] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if tag, err := is.Next(6, 0, 3); err != nil || tag.TS() == 0 {
		t.Errorf("another block: %v %v", tag, err)
	}
	if _, err := is.Next(7, replica.MakeTag(replica.MaxTS, 1), 3); !errors.Is(err, blockstore.ErrProtocol) {
		t.Errorf("exhausted timestamps: %v", err)
	}
}
