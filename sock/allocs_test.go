//go:build !race

package sock

import (
	"io"
	"testing"
)

// TestRoundTripAllocs: a Write and a Read of a record allocate nothing, in
// every mode, over shm (the hot path: staging copy, post, ring poll,
// delivery, credit return).
func TestRoundTripAllocs(t *testing.T) {
	for _, mode := range []Mode{Direct, SP2C, SPSC} {
		t.Run(mode.String(), func(t *testing.T) {
			c1, c2, done := pipe(t, Config{Mode: mode}, "shm")
			defer done()
			defer c1.Close()
			defer c2.Close()
			out, in := make([]byte, 512), make([]byte, 512)
			round := func() {
				if _, err := c1.Write(out); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c2, in); err != nil {
					t.Fatal(err)
				}
			}
			for range 2000 { // past the first credit returns and ring laps
				round()
			}
			if n := testing.AllocsPerRun(2000, round); n > 0.01 {
				t.Fatalf("%v allocations per Write+Read, want 0", n)
			}
		})
	}
}
