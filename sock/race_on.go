//go:build race

package sock

import "sync"

// Under the race detector, a record's publication and its consumption are
// ordered by shared memory the detector cannot see: the sender stores into
// its own mapping of the peer's window, the receiver loads from another
// mapping of the same pages. Kernel sockets have the same gap and the
// runtime closes it with an annotation on every read and write system call;
// these two do the same for sock: the sender releases before it publishes a
// header, the receiver acquires after it sees one, so what the sender's
// goroutine did before Write happens before what the receiver's does after
// Read, as with a TCP connection.
var raceSync sync.Mutex

func raceRelease() {
	raceSync.Lock()
	//lint:ignore SA2001 the empty critical section is an edge for the race detector
	raceSync.Unlock()
}

func raceAcquire() {
	raceSync.Lock()
	//lint:ignore SA2001 as above
	raceSync.Unlock()
}
