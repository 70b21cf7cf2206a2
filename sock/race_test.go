//go:build race

package sock

// raceEnabled: the race detector maps shadow memory for what the process
// touches, many more anonymous mappings as the heap grows.
const raceEnabled = true
