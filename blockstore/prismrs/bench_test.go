package prismrs_test

import (
	"context"
	"testing"
)

// BenchmarkWrite and BenchmarkRead measure one client's operations on
// three replicas, on loop (what an operation costs the client: time,
// allocations) and over tcp on loopback.
func BenchmarkWrite(b *testing.B) {
	for _, scheme := range []string{"loop", "tcp"} {
		b.Run(scheme, func(b *testing.B) {
			bd := newBedOn(b, scheme, benchN)
			c := bd.create(4096, 64)
			ctx := context.Background()
			data := block(4096, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := c.Write(ctx, uint64(i%64), data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.Phases())/float64(b.N), "phases/op")
			b.ReportMetric(float64(c.RoundTrips())/float64(b.N), "lists/op")
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, scheme := range []string{"loop", "tcp"} {
		b.Run(scheme, func(b *testing.B) {
			bd := newBedOn(b, scheme, benchN)
			c := bd.create(4096, 64)
			ctx := context.Background()
			for i := range 64 {
				if err := c.Write(ctx, uint64(i), block(4096, byte(i))); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, 0, 4096)
			p0, l0 := c.Phases(), c.RoundTrips()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := c.Read(ctx, uint64(i%64), buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.Phases()-p0)/float64(b.N), "phases/op")
			b.ReportMetric(float64(c.RoundTrips()-l0)/float64(b.N), "lists/op")
		})
	}
}

// benchN is the benchmarks' replica count.
var benchN = 3
