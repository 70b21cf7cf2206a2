package ring

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkThroughput64 streams 64-byte messages from a producer goroutine
// to a consumer goroutine through a 64 KiB ring in a shared mapping; it
// reports messages per second. Both sides spin briefly, then park.
func BenchmarkThroughput64(b *testing.B) {
	seg := newSeg(b, Size(64<<10)).Bytes()
	prod, err := Init(seg)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := Attach(seg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const spin = 50 * time.Microsecond
	msg := make([]byte, 64)
	var wg sync.WaitGroup
	b.SetBytes(64)
	b.ResetTimer()
	wg.Go(func() {
		for i := range b.N {
			msg[0] = byte(i)
			for {
				err := prod.Write(msg)
				if err == nil {
					break
				}
				if err != ErrFull {
					panic(err)
				}
				if err := prod.WaitSpace(ctx, len(msg), spin, nil); err != nil {
					panic(err)
				}
			}
		}
	})
	for i := range b.N {
		p, err := cons.Peek()
		for err == ErrEmpty {
			if err = cons.Wait(ctx, spin, nil); err == nil {
				p, err = cons.Peek()
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(p) != 64 || p[0] != byte(i) {
			b.Fatalf("message %d: bad content", i)
		}
		cons.Release()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPingPong8 bounces an 8-byte message between two goroutines
// over a pair of rings (one per direction), both busy-spinning with
// yields; one op is one round trip.
func BenchmarkPingPong8(b *testing.B) {
	ping, pingCons := benchPair(b)
	pong, pongCons := benchPair(b)
	ctx := context.Background()
	const spin = time.Second // never park
	msg := make([]byte, 8)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range b.N {
			if err := pingCons.Wait(ctx, spin, nil); err != nil {
				panic(err)
			}
			p, err := pingCons.Peek()
			if err != nil {
				panic(err)
			}
			if err := pong.Write(p); err != nil {
				panic(err)
			}
			pingCons.Release()
		}
	})
	b.ResetTimer()
	for i := range b.N {
		msg[0] = byte(i)
		if err := ping.Write(msg); err != nil {
			b.Fatal(err)
		}
		if err := pongCons.Wait(ctx, spin, nil); err != nil {
			b.Fatal(err)
		}
		p, err := pongCons.Peek()
		if err != nil || p[0] != byte(i) {
			b.Fatalf("round trip %d: %v", i, err)
		}
		pongCons.Release()
	}
	wg.Wait()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/roundtrip")
}

// benchPair returns producer and consumer handles on a 4 KiB ring in a
// shared mapping.
func benchPair(b *testing.B) (*Ring, *Ring) {
	mem := newSeg(b, Size(4096)).Bytes()
	prod, err := Init(mem)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := Attach(mem)
	if err != nil {
		b.Fatal(err)
	}
	return prod, cons
}
