//go:build !race

package shm_test

// raceSlack is 0 without the race detector (see anonSlack).
const raceSlack = 0
