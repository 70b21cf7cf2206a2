package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/kv"
)

// TestBatchKV: concurrent GETs through a batching client of memcached and
// Redis get their own values (hits and misses mixed, duplicates in one
// batch), several to a round trip and never more than the cap; a closed
// client fails its GETs.
func TestBatchKV(t *testing.T) {
	for _, c := range []struct {
		name, bin, peer string
		start           func(context.Context) (*Server, error)
		dial            func(context.Context, string, int) (*BatchKV, error)
	}{
		{"memcached", "memcached", "memcached", StartMemcached, DialMemcachedBatch},
		{"Redis", "redis-server", "redis", StartRedis, DialRedisBatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			need(t, c.bin, c.peer)
			ctx := t.Context()
			srv, err := c.start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()
			const max = 4
			b, err := c.dial(ctx, srv.Addr, max)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for i := 0; i < 50; i += 2 { // odd keys stay missing
				if err := b.Put(ctx, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for task := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := range 200 {
						i := (task*7 + n) % 50
						v, err := b.Get(ctx, fmt.Appendf(nil, "k%d", i), nil)
						switch {
						case i%2 == 1 && !errors.Is(err, kv.ErrNotFound):
							errs <- fmt.Errorf("k%d: %q, %v; want not found", i, v, err)
							return
						case i%2 == 0 && (err != nil || string(v) != fmt.Sprintf("v%d", i)):
							errs <- fmt.Errorf("k%d: %q, %v; want v%d", i, v, err, i)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			trips, keys := b.RoundTrips(), b.Keys()
			if keys != 16*200 || trips == 0 || trips > keys || keys > trips*max {
				t.Errorf("%d GETs in %d round trips, want 3,200 in 800 to 3,200", keys, trips)
			}
			t.Logf("%.2f keys per round trip", float64(keys)/float64(trips))
			b.Close()
			if _, err := b.Get(ctx, []byte("k0"), nil); !errors.Is(err, ErrBatchClosed) {
				t.Errorf("GET after Close: %v, want ErrBatchClosed", err)
			}
		})
	}
}
