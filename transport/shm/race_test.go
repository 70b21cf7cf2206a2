//go:build race

package shm_test

// raceSlack: the race detector's own memory for the threads and
// goroutines of a test that runs after others in one process (see
// anonSlack).
const raceSlack = 256
