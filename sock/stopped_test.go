package sock

import (
	"syscall"
	"testing"
	"time"
)

// TestCloseWithStoppedPeer: the peer process is stopped (SIGSTOP) and the
// ring toward it is full. Close must return promptly, as a TCP socket's
// does (its FIN waits in the kernel), not wait for the peer to resume.
//
// Over shm only: over tcp the peer's NIC is a goroutine of the stopped
// process, and a Write to it fails the link after verbs' default retry
// budget (RETRY_EXC_ERR), which is not what this test is about.
func TestCloseWithStoppedPeer(t *testing.T) {
	for _, tr := range []string{"shm"} {
		t.Run(tr, func(t *testing.T) {
			rig := newFaultRig(t, killConfig(), tr)
			children, conns := startWriters(t, rig.ln, 1, 1, 64<<10)
			child, c := children[0], conns[0]
			if err := child.Process().Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { child.Process().Signal(syscall.SIGCONT) })
			// Small records fill the ring before the window runs out.
			// Write until the ring has no room for another (the race
			// detector makes each Write slow: no fixed time would do).
			c.SetWriteDeadline(time.Now().Add(faultTimeout))
			// One 16-byte payload, then 8-byte ones: the ring fills to its
			// last word (each record keeps room for its zero trailer).
			if _, err := c.Write(make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			p := c.part
			full := func() bool {
				if !p.lock(nil, nil) {
					t.Fatal("the link failed")
				}
				defer p.unlock()
				_, room := p.room(recordSize(8))
				return !room
			}
			small := make([]byte, 8)
			for !full() {
				if _, err := c.Write(small); err != nil {
					t.Fatalf("Write to a stopped peer: %v (link: %v)", err, c.l.failed())
				}
			}
			if !p.lock(nil, nil) {
				t.Fatal("the link failed")
			}
			_, room := p.room(hdrSize)
			p.unlock()
			if room {
				t.Fatalf("the ring toward the stopped peer has room left (%d bytes written, shadow %d): the test does not test", p.write, p.shadow())
			}
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			select {
			case <-closed:
			case <-time.After(faultTimeout):
				t.Fatal("Close waits for a stopped peer")
			}
		})
	}
}
