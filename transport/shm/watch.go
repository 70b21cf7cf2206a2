package shm

import (
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// peerCheckEvery is how often a device checks that the processes of its
// peers still run. A peer's death normally closes its control sockets and
// its connections end at once; the check catches a peer that died while
// another process holds a duplicate of its sockets (a child it spawned
// with them, say), whose sockets therefore never close.
const peerCheckEvery = 500 * time.Millisecond

// watch runs checkPeers every peerCheckEvery until the device closes.
func (d *device) watch() {
	defer d.wg.Done()
	t := time.NewTicker(peerCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.checkPeers()
		}
	}
}

// checkPeers ends every connection whose peer process is gone (by pid and
// start time, from SO_PEERCRED at set-up, so a reused pid is no
// alibi), as the end of its control socket would: the link fails (its
// QPs' outstanding requests complete with RETRY_EXC_ERR, later ones fail
// at once) and the session closes, and both free what they hold.
func (d *device) checkPeers() {
	alive := map[shmem.ProcessID]bool{} // each process read once per round
	gone := func(p shmem.ProcessID) bool {
		a, ok := alive[p]
		if !ok {
			a = p.Alive()
			alive[p] = a
		}
		return !a
	}
	for _, l := range d.links.Snapshot() {
		if l.conn != nil && !l.Dead() && gone(l.peer) {
			l.fail(fmt.Errorf("peer %s: its process %v is gone", l.address, l.peer))
		}
	}
	for _, s := range *d.sessSnap.Load() {
		if !s.closed.Load() && gone(s.peer) {
			s.close(fmt.Errorf("peer %s: its process %v is gone", s.address, s.peer))
		}
	}
}
