package farm_test

import (
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/farm"
)

// TestConcurrentRecords: goroutines sharing one client write records
// into one ring at once, round and round it: the node takes every one,
// in order, none torn.
func TestConcurrentRecords(t *testing.T) {
	b := newBedWith(t, 3, farm.NodeConfig{MaxMessage: 1 << 10, LogSize: 4 << 10})
	cfg := b.config()
	cfg.MaxMessage = 1 << 10
	db := b.dbWith(cfg)
	ctx := tctx(t)
	before := b.nodes[0].Stats().Records
	const each, workers = 2000, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				seq := uint64(w*each + i + 1)
				err := farm.AppendAbort(ctx, db, 0, seq)
				if i%3 == 0 {
					err = farm.AppendBackup(ctx, db, 0, 2, seq, int(seq*7919%200))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for b.nodes[0].Stats().Records-before < each*workers && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := b.nodes[0].Stats()
	if got := st.Records - before; got < each*workers {
		t.Fatalf("the node took %d records of %d (%d wraps)", got, each*workers, st.Wraps)
	}
	t.Logf("%d records, %d wraps", st.Records-before, st.Wraps)
}
