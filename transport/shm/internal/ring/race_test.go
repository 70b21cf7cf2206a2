//go:build race

package ring

// raceEnabled reports whether the race detector is on; the longer tests
// then run fewer iterations.
const raceEnabled = true
