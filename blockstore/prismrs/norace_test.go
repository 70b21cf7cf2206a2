//go:build !race

package prismrs_test

// raceEnabled: the race detector slows everything down some tenfold.
const raceEnabled = false
