package tcp

import (
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errAgain says a non-blocking read found nothing to read.
var errAgain = errors.New("tcp: no data yet")

// rawReader reads a connection's socket without blocking: Read returns
// errAgain instead of waiting. It uses RawConn.Control, which does not take
// the connection's read lock, so a goroutine parked in a blocking wait on
// the same socket does not hold it up.
type rawReader struct {
	rc     syscall.RawConn
	fn     func(fd uintptr)      // bound once: Control(fn) allocates nothing
	waitFn func(fd uintptr) bool // bound once, for waitReadable
	waited bool                  // waitReadable's state; one waiter at a time
	pfd    [1]unix.PollFd
	p      []byte
	n      int
	err    error
}

func newRawReader(c net.Conn) (*rawReader, error) {
	rc, err := rawConnOf(c)
	if err != nil {
		return nil, err
	}
	r := &rawReader{rc: rc}
	r.fn = r.read
	r.waitFn = r.wait
	return r, nil
}

func (r *rawReader) read(fd uintptr) {
	for {
		n, err := rawRead(int(fd), r.p) // quietio.go
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			r.n, r.err = 0, errAgain
		case err != nil:
			r.n, r.err = 0, err
		case n == 0:
			r.n, r.err = 0, io.EOF
		default:
			r.n, r.err = n, nil
		}
		return
	}
}

// Read implements io.Reader without blocking.
func (r *rawReader) Read(p []byte) (int, error) {
	r.p = p
	if err := r.rc.Control(r.fn); err != nil {
		return 0, err
	}
	r.p = nil
	return r.n, r.err
}

// waitReadable blocks until the socket may have data (or fails). One
// goroutine at a time may wait.
func (r *rawReader) waitReadable() error {
	r.waited = false
	return r.rc.Read(r.waitFn)
}

// wait is RawConn.Read's callback. RawConn.Read forgets a readiness the
// poller reported before the call, so the first callback looks at the
// socket itself (poll(2) with no timeout, consuming nothing) before
// parking.
func (r *rawReader) wait(fd uintptr) bool {
	if r.waited {
		return true
	}
	r.waited = true
	r.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	for {
		n, err := rawPollNow(r.pfd[:]) // quietio.go
		if err == unix.EINTR {
			continue
		}
		// Data, end of stream or an error: let the reader find out.
		// Nothing yet: park until the poller reports the socket readable.
		return err != nil || n > 0
	}
}

// spinReader reads a connection the way a soft NIC core polls: it spins
// on non-blocking reads for up to spin after the last data, and only then
// parks in a blocking wait. A busy peer is served without the wake-up cost
// of an idle CPU; an idle one costs nothing after the spin.
//
// It yields the processor after every read that found nothing. Serving a
// request often makes a goroutine runnable on this processor — the
// consumer of a receive completion, such as a service that answers a SEND
// with a SEND — and that goroutine must not wait for the spin to end (or
// for another processor's thread to wake up and steal it): on a loaded
// machine that wait was most of an echoed SEND's round trip.
type spinReader struct {
	raw  nbReader
	spin time.Duration
}

// nbReader is what spinReader polls: a rawReader (or a test's stand-in).
type nbReader interface {
	// Read reads without blocking; errAgain means nothing to read yet.
	Read(p []byte) (int, error)
	// waitReadable blocks until Read may find something.
	waitReadable() error
}

func (s *spinReader) Read(p []byte) (int, error) {
	var start time.Time
	for i := 0; ; i++ {
		n, err := s.raw.Read(p)
		if err != errAgain {
			return n, err
		}
		if s.spin <= 0 {
			break
		}
		if i == 0 {
			start = time.Now()
		} else if i&15 == 0 && time.Since(start) > s.spin {
			break
		}
		runtime.Gosched()
	}
	for {
		if err := s.raw.waitReadable(); err != nil {
			return 0, err
		}
		n, err := s.raw.Read(p)
		if err != errAgain {
			return n, err
		}
	}
}

// rawConnOf returns c's raw connection, or an error when c has no file
// descriptor (a wrapped connection in tests).
func rawConnOf(c net.Conn) (syscall.RawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("tcp: connection has no raw file descriptor")
	}
	return sc.SyscallConn()
}
