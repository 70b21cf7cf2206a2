//go:build race

package prismtx_test

// raceEnabled: the race detector slows everything down some tenfold.
const raceEnabled = true
