package transfer

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// BenchmarkFetch fetches one object per iteration over the loop
// transport by each protocol (the object is aborted instead of sealed, so
// it can be fetched again).
func BenchmarkFetch(b *testing.B) {
	for _, size := range []int{1 << 10, 32 << 10, 1 << 20, 4 << 20} {
		for _, p := range Protocols() {
			b.Run(fmt.Sprintf("%v/%d", p, size), func(b *testing.B) {
				r := newRig(b, "loop", Config{})
				f := r.fetcher(b, p)
				id := r.src.add(size, 0)
				sink := abortingSink{newMemSink()}
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if errs := f.Fetch(ctx, []object.ID{id}, sink); errs[0] != nil {
						b.Fatal(errs[0])
					}
				}
			})
		}
	}
}
