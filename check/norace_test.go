//go:build !race

package check

// raceEnabled: the race detector slows the large histories tenfold.
const raceEnabled = false
