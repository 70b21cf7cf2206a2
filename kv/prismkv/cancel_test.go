package prismkv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv/prismkv"
)

// TestCancelledInsertsUnlock cancels inserts of new keys at random
// points while their lookup, which takes the key's segment lock, is in
// flight, with other clients inserting into the same segments: a
// cancelled insert releases the lock it may hold, so nobody has to wait
// out its lease (one second) and take it over.
func TestCancelledInsertsUnlock(t *testing.T) {
	_, _, cs := node(t, "tcp", prismkv.Config{Slots: 1 << 12}, 4)
	var wg sync.WaitGroup
	for ci, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				ctx, cancel := context.WithCancel(context.Background())
				if i%4 == 0 {
					time.AfterFunc(time.Duration(i%7)*20*time.Microsecond, cancel)
				}
				// Keys of a few segments: the clients meet on their locks.
				_ = c.Put(ctx, []byte(fmt.Sprintf("k%d-%d", ci, i)), []byte("v"))
				cancel()
			}
		}()
	}
	wg.Wait()
	for i, c := range cs {
		if n := c.Takeovers(); n != 0 {
			t.Errorf("client %d took over %d locks: a cancelled insert kept its lock", i, n)
		}
	}
}
