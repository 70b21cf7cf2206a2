package abdrpc_test

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
)

// BenchmarkOps: Writes and Reads of 4 KiB blocks by one client of three
// replicas on a loop fabric, one operation at a time and 16 at once.
func BenchmarkOps(b *testing.B) {
	cl := startCluster(b, 3, "", nil)
	cl.create(4096, 1024)
	c := cl.dial()
	data := bytes.Repeat([]byte{7}, 4096)
	for _, par := range []int{1, 16} {
		b.Run("write/par="+strconv.Itoa(par), func(b *testing.B) {
			run(b, c, par, func(i uint64) error { return c.Write(context.Background(), i%1024, data) })
		})
		b.Run("read/par="+strconv.Itoa(par), func(b *testing.B) {
			run(b, c, par, func(i uint64) error { _, err := c.Read(context.Background(), i%1024, nil); return err })
		})
	}
}

// run runs op b.N times on par goroutines and reports c's calls per
// operation.
func run(b *testing.B, c *abdrpc.Client, par int, op func(i uint64) error) {
	b.ReportAllocs()
	t0 := c.RoundTrips()
	var next atomic.Uint64
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for i := next.Add(1); i <= uint64(b.N); i = next.Add(1) {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(c.RoundTrips()-t0)/float64(b.N), "calls/op")
}
