package shm

import (
	"testing"
	"time"
)

// TestSilentLinkGrace: a link first found silent for a retry budget gets
// one budget more (on a loaded machine a node starved of CPU answered
// after the budget and its clients' requests failed with RETRY_EXC_ERR);
// silent through its grace it fails, and only a response batch taken
// earns the next grace.
func TestSilentLinkGrace(t *testing.T) {
	const d = 20 * time.Millisecond
	l := &link{seenAt: time.Now()} // no rings: nothing waits in them
	time.Sleep(30 * time.Millisecond)
	if !l.Progressed(d) {
		t.Fatal("a link silent for one budget was declared dead at once")
	}
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(d) {
		t.Fatal("a link silent through its grace too progressed")
	}
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(d) {
		t.Fatal("a link that took no response since its grace got another")
	}
	l.recvd.Add(1)
	if !l.Progressed(d) {
		t.Fatal("a response batch taken is no progress")
	}
	time.Sleep(30 * time.Millisecond)
	if !l.Progressed(d) {
		t.Fatal("a link that answered since its grace got no new one")
	}
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(d) {
		t.Fatal("the new grace did not end")
	}
}
