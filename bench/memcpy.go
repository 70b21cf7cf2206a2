package bench

import (
	"context"
	"time"
)

// MemcpyGBps is a plain Go memory-copy bandwidth probe: it copies size
// bytes from one heap buffer to another with the built-in copy
// (runtime.memmove) over and over for d, after one untimed copy that
// faults the pages in, and returns the bandwidth in 10⁹ bytes per second.
// It stops early, returning what it measured, when ctx is done; it
// returns 0 when size or d is not positive.
func MemcpyGBps(ctx context.Context, size int, d time.Duration) float64 {
	if size <= 0 || d <= 0 {
		return 0
	}
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	// Read the clock about every 64 KiB copied: its cost stays far below
	// a copy's.
	per := max(1, (64<<10)/size)
	n := 0
	start := time.Now()
	deadline := start.Add(d)
	for {
		for range per {
			copy(dst, src)
		}
		n += per
		if now := time.Now(); !now.Before(deadline) || ctx.Err() != nil {
			return float64(n) * float64(size) / now.Sub(start).Seconds() / 1e9
		}
	}
}
