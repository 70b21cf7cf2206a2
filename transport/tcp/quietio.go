package tcp

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The socket reads and writes of a connection's hot path are raw system
// calls: read(2) and write(2) on a non-blocking socket never block, so
// the runtime's bookkeeping for a system call that might
// (entersyscall / exitsyscall) buys nothing — and costs more than its own
// time: a process whose processors all went idle (a node between two
// frame batches, a client waiting for its answers) has let the runtime's
// monitor thread sleep, and entersyscall wakes it, after which it sleeps
// and wakes every 20 µs a few times before it sleeps for good again. On
// a node serving one busy connection that was about a quarter of its
// CPU. Waiting for the socket is still the runtime poller's job
// (RawConn.Read / Write), so deadlines and Close work as for any
// net.Conn.

// rawRead is read(2) without entersyscall; fd must be non-blocking.
func rawRead(fd int, p []byte) (int, error) {
	var b unsafe.Pointer
	if len(p) > 0 {
		b = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(b), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawWrite is write(2) without entersyscall; fd must be non-blocking.
func rawWrite(fd int, p []byte) (int, error) {
	var b unsafe.Pointer
	if len(p) > 0 {
		b = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(b), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawPollNow is poll(2) of fds with no timeout (ppoll with a zero
// timespec), without entersyscall: it never blocks.
func rawPollNow(fds []unix.PollFd) (int, error) {
	var ts unix.Timespec
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// quietConn reads and writes a connection with rawRead and rawWrite and
// waits for it in the runtime's poller: an io.ReadWriter with net.Conn's
// blocking semantics, deadlines included (they are the connection's).
// One reader and one writer at a time.
type quietConn struct {
	rc   syscall.RawConn
	rfn  func(fd uintptr) bool // bound once: RawConn.Read(rfn) allocates nothing
	wfn  func(fd uintptr) bool
	p    []byte
	n    int
	rerr error
	w    []byte
	wn   int
	werr error
}

// newQuietConn returns a quietConn for c, or an error when c has no file
// descriptor (a wrapped connection in tests).
func newQuietConn(c net.Conn) (*quietConn, error) {
	rc, err := rawConnOf(c)
	if err != nil {
		return nil, err
	}
	q := &quietConn{rc: rc}
	q.rfn, q.wfn = q.read, q.write
	return q, nil
}

// Read implements io.Reader: it returns what one read(2) finds, waiting
// for the socket to be readable first when it is empty.
func (q *quietConn) Read(p []byte) (int, error) {
	q.p = p
	err := q.rc.Read(q.rfn)
	q.p = nil
	if err != nil {
		return 0, err
	}
	return q.n, q.rerr
}

func (q *quietConn) read(fd uintptr) bool {
	for {
		n, err := rawRead(int(fd), q.p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false // wait until readable
		case err != nil:
			q.n, q.rerr = 0, err
		case n == 0 && len(q.p) > 0:
			q.n, q.rerr = 0, io.EOF
		default:
			q.n, q.rerr = n, nil
		}
		return true
	}
}

// Write implements io.Writer: it writes all of p, waiting for room in
// the socket whenever it is full.
func (q *quietConn) Write(p []byte) (int, error) {
	q.w, q.wn, q.werr = p, 0, nil
	err := q.rc.Write(q.wfn)
	q.w = nil
	if err == nil {
		err = q.werr
	}
	return q.wn, err
}

func (q *quietConn) write(fd uintptr) bool {
	for q.wn < len(q.w) {
		n, err := rawWrite(int(fd), q.w[q.wn:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false // wait until writable
		case err != nil:
			q.werr = err
			return true
		}
		q.wn += n
	}
	return true
}
