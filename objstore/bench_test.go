package objstore

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkGet measures a local Get and Release of one sealed object: two
// round trips on the socket whatever the object's size (the acceptance
// asks 1 KiB and 64 MiB within 2× of each other).
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			s := newTestStore(b, 80<<20)
			c := connect(b, s)
			id := NewID()
			put(b, c, id, size, nil, 1)
			ctx := context.Background()
			ids := []ID{id}
			b.ResetTimer()
			for b.Loop() {
				got, err := c.Get(ctx, ids, 0)
				if err != nil || got[0] == nil {
					b.Fatal(got, err)
				}
				if err := c.Release(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreateSeal measures creating, sealing, releasing and deleting
// a 1 KiB object (four round trips).
func BenchmarkCreateSeal(b *testing.B) {
	s := newTestStore(b, 16<<20)
	c := connect(b, s)
	ctx := context.Background()
	for b.Loop() {
		id := NewID()
		if _, err := c.Create(ctx, id, 1<<10, nil); err != nil {
			b.Fatal(err)
		}
		if err := c.Seal(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := c.Release(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
