package sherman_test

import (
	"context"
	"testing"

	"github.com/rdmakit/rdmakit/btree/sherman"
)

// TestGetAllocs: a warm Get allocates nothing — Sherman's (one leaf
// READ, decoded into the slot's scratch node) and Smart-BT's
// speculative hit (one entry READ) — when dst has room for the value.
func TestGetAllocs(t *testing.T) {
	for _, sys := range []struct {
		name string
		cfg  sherman.Config
	}{{"sherman", sherman.Config{}}, {"smart-bt", smartCfg(sherman.AllTechniques)}} {
		t.Run(sys.name, func(t *testing.T) {
			ctx := context.Background()
			b := newBed(t, 1, 16<<20)
			c := b.client(t, sys.cfg)
			const n = 500
			for i := range n {
				if err := c.Put(ctx, benchKey(i), []byte("value")); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				if _, err := c.Get(ctx, benchKey(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			key, dst := benchKey(n/2), make([]byte, 0, 16)
			var err error
			allocs := testing.AllocsPerRun(200, func() {
				if dst, err = c.Get(ctx, key, dst[:0]); err != nil {
					t.Fatal(err)
				}
			})
			if string(dst) != "value" {
				t.Fatalf("got %q", dst)
			}
			if allocs != 0 {
				t.Fatalf("a warm Get allocates %.1f times", allocs)
			}
			if st := c.Stats(); sys.cfg.Smart != nil && st.SpecHits < 200 {
				t.Fatalf("the Gets were not speculative hits: %+v", st)
			}
		})
	}
}
