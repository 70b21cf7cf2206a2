//go:build !race

package ford_test

import "time"

// failSilence is how long a member may be silent before it is taken
// out.
const failSilence = 300 * time.Millisecond
