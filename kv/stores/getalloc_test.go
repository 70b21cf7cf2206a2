package stores_test

import (
	"context"
	"fmt"
	"testing"
)

// TestGetAllocatesNothing guards the GET path of PRISM-KV and Smart-HT (a
// speculative hit through its slot cache), on the shared connection (or
// Smart-HT's runtime) and on the slots' own: a GET that finds its key
// allocates nothing, client and node together. Each allocation costs the
// client CPU a GET over shm is bounded by.
func TestGetAllocatesNothing(t *testing.T) {
	for _, design := range []string{"prism-kv", "prism-kv/slot-qps", "smart-ht", "smart-ht/slot-qps"} {
		t.Run(design, func(t *testing.T) {
			c := benchClientOn(t, "loop", design, 0)
			ctx := context.Background()
			keys := make([][]byte, 64)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("key-%04d", i))
				if err := c.Put(ctx, keys[i], make([]byte, 64)); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 0, 128)
			for _, k := range keys { // warm the slot caches
				if _, err := c.Get(ctx, k, buf); err != nil {
					t.Fatal(err)
				}
			}
			i := 0
			n := testing.AllocsPerRun(200, func() {
				if _, err := c.Get(ctx, keys[i%len(keys)], buf); err != nil {
					t.Fatal(err)
				}
				i++
			})
			if n >= 1 {
				t.Errorf("a GET allocates %.1f times, want 0", n)
			}
		})
	}
}
