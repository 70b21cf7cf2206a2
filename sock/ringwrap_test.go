package sock

import (
	"testing"
)

// TestRingLaps: ping-pong of random bytes in records of varying sizes
// through a small ring, for many laps of it. The receiver keeps catching
// up with the sender, so it looks at the next header slot before the
// sender has written it — on a later lap a slot that held payload before.
// It must read an empty slot there, never old payload taken for a header.
func TestRingLaps(t *testing.T) {
	for _, tr := range transports {
		for _, mode := range []Mode{Direct, SP2C} {
			t.Run(tr+"/"+mode.String(), func(t *testing.T) {
				cfg := Config{Partitions: 1, RingSize: 64 << 10, MTU: 4 << 10, Mode: mode}
				a, b, stop := pipe(t, cfg, tr)
				defer stop()
				defer a.Close()
				defer b.Close()
				sent := 0
				for i := 0; sent < 3*cfg.RingSize; i++ {
					msg := pattern(1+(i*977)%(3*cfg.MTU), byte(i))
					if err := roundTrip(a, b, msg); err != nil {
						t.Fatalf("after %d bytes (%.1f laps): %v", sent, float64(sent)/float64(cfg.RingSize), err)
					}
					sent += len(msg)
				}
			})
		}
	}
}
