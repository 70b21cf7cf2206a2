package tcp

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// emptySocket is an nbReader that finds nothing until done is set, and
// counts its reads.
type emptySocket struct {
	reads  atomic.Int64
	onRead func(n int64)
	done   atomic.Bool
}

func (e *emptySocket) Read(p []byte) (int, error) {
	n := e.reads.Add(1)
	if e.onRead != nil {
		e.onRead(n)
	}
	if e.done.Load() {
		return copy(p, "x"), nil
	}
	return 0, errAgain
}

func (e *emptySocket) waitReadable() error { return nil }

// TestSpinReaderYieldsAfterEmptyRead: a goroutine made runnable while the
// soft NIC spins on a quiet connection (the consumer of a completion the
// last request caused, e.g. a node's echo service) runs after the
// spinner's next empty read, not after a whole batch of them. With one
// processor the order is deterministic: the woken goroutine can only run
// when the spinner yields.
func TestSpinReaderYieldsAfterEmptyRead(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sock := &emptySocket{}
	var ranAt atomic.Int64
	sock.onRead = func(n int64) {
		if n == 1 {
			go func() {
				ranAt.Store(sock.reads.Load())
				sock.done.Store(true)
			}()
		}
		if n > 1000 {
			sock.done.Store(true) // the woken goroutine never ran: stop anyway
		}
	}
	r := &spinReader{raw: sock, spin: time.Hour}
	var buf [8]byte
	if n, err := r.Read(buf[:]); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	// After the first read's yield; the scheduler may now and then take
	// the spinner back from the global queue first (one read more). The
	// old spinner yielded every 16 reads.
	if at := ranAt.Load(); at < 1 || at > 2 {
		t.Fatalf("the goroutine woken during the first read ran after read %d, want 1 (or 2) (reads: %d)", at, sock.reads.Load())
	}
}
