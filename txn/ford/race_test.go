//go:build race

package ford_test

import "time"

// failSilence is how long a member may be silent before it is taken
// out: the race detector slows a loaded machine's goroutines enough for
// a live member to miss a shorter one.
const failSilence = 1000 * time.Millisecond
