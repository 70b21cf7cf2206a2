package tcp

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// recordConn is a connection that takes every write at once and records,
// for each, whether flag was set when it came.
type recordConn struct {
	net.Conn
	flag    *atomic.Bool
	flagged []bool
	onWrite func(i int)
}

func (c *recordConn) Write(b []byte) (int, error) {
	c.flagged = append(c.flagged, c.flag.Load())
	if c.onWrite != nil {
		c.onWrite(len(c.flagged))
	}
	return len(b), nil
}

func newTestLink(c net.Conn) *link {
	l := &link{dev: &device{}, address: "tcp://peer:1", conn: c, done: make(chan struct{})}
	l.cond.L = &l.mu
	return l
}

func postOne(t *testing.T, l *link) {
	t.Helper()
	if err := l.Append(&nic.Request{SrcQPN: 1, DstQPN: 2, Opcode: verbs.OpSend}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestLonePosterWritesAtOnce: a poster alone on its link whose earlier
// request is still unanswered (an echo service posting the next echo
// before the last one's ack was read) writes without first yielding to
// other goroutines. With one processor the order is deterministic.
func TestLonePosterWritesAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomic.Bool
	c := &recordConn{flag: &ran}
	l := newTestLink(c)
	postOne(t, l) // on the wire, unanswered
	go ran.Store(true)
	postOne(t, l)
	if len(c.flagged) != 2 || c.flagged[1] {
		t.Fatalf("writes %v: the second request waited for a runnable goroutine", c.flagged)
	}
}

// TestConcurrentPostersStillBatch: once a write has carried the requests
// of several posters, a poster with requests on the wire yields before
// writing, so that goroutines ready to post share its write.
func TestConcurrentPostersStillBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomic.Bool
	c := &recordConn{flag: &ran}
	l := newTestLink(c)
	c.onWrite = func(i int) {
		if i == 1 { // two other posters post while the first write is in progress
			postOne(t, l)
			postOne(t, l)
		}
	}
	postOne(t, l) // writes its own request, then the other two's in one write
	if len(c.flagged) != 2 {
		t.Fatalf("%d writes, want 2", len(c.flagged))
	}
	c.onWrite = nil
	go ran.Store(true)
	postOne(t, l)
	if len(c.flagged) != 3 || !c.flagged[2] {
		t.Fatalf("writes %v: the poster did not yield before writing", c.flagged)
	}
}
