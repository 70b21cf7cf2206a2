package shmem

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"golang.org/x/sys/unix"
)

// childLimit bounds a child's life, so that no child outlives a failed
// or killed test run for long.
const childLimit = 20 * time.Second

// TestMain lets the test binary play the roles of runChild.
func TestMain(m *testing.M) { remotedev.TestMain(m) }

func init() {
	for _, role := range []string{"exchange", "futex-wait", "count", "hold"} {
		remotedev.Role(role, func(arg string) int { return runChild(role, arg) })
	}
}

// Layout of the segment the lock and futex children share with the
// parent (offsets in bytes).
const (
	offLock    = 0  // Lock, 16 bytes
	offReady   = 16 // uint32: child-to-parent flag
	offGo      = 20 // uint32: parent-to-child start flag (futex word)
	offWord    = 24 // uint32: futex word
	offResult  = 28 // uint32: child's result
	offCounter = 64 // uint64: plain counter guarded by the Lock
	testSegLen = 4096
)

func u32(b []byte, off int) *uint32 {
	p, err := Uint32At(b[off:])
	if err != nil {
		panic(err)
	}
	return p
}

func u64(b []byte, off int) *uint64 {
	p, err := Uint64At(b[off:])
	if err != nil {
		panic(err)
	}
	return p
}

func lockOf(b []byte) *Lock {
	l, err := LockAt(b[offLock:])
	if err != nil {
		panic(err)
	}
	return l
}

// runChild is the main of a child process. Descriptor 3 is its first
// ExtraFiles entry: a Unix socket for "exchange", a memfd otherwise.
func runChild(role, arg string) int {
	time.AfterFunc(childLimit, func() {
		fmt.Fprintln(os.Stderr, "child: time limit")
		os.Exit(3)
	})
	if role == "exchange" {
		return childExchange()
	}
	seg, err := Open(3, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 1
	}
	unix.Close(3)
	b := seg.Bytes()
	switch role {
	case "futex-wait":
		// Publish readiness, then sleep until the parent wakes us with
		// the value unchanged: only a real FUTEX_WAKE returns nil here.
		atomic.StoreUint32(u32(b, offReady), 1)
		if err := Wait(u32(b, offWord), 0, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "child: wait:", err)
			return 2
		}
		atomic.StoreUint32(u32(b, offResult), 1)
		return 0
	case "count":
		m, _ := strconv.Atoi(arg)
		atomic.AddUint32(u32(b, offReady), 1)
		waitFlag(u32(b, offGo))
		if err := countUnderLock(lockOf(b), u64(b, offCounter), m); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	case "hold":
		if err := lockOf(b).Lock(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "child: lock:", err)
			return 1
		}
		// Half-update the guarded data, as a crash mid-update would.
		*u64(b, offCounter) = 0xdead
		atomic.StoreUint32(u32(b, offReady), 1)
		if arg == "exit" {
			return 0 // exit holding the lock
		}
		time.Sleep(childLimit) // until SIGKILL
		return 0
	}
	fmt.Fprintln(os.Stderr, "child: unknown role", role)
	return 1
}

// childExchange receives a segment over the socket on descriptor 3,
// checks the parent's pattern, writes its own pattern into the second
// half, and sends back a segment of its own.
func childExchange() int {
	f := os.NewFile(3, "sock")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	var msg [8]byte
	n, fds, err := RecvFDs(conn, msg[:], 1)
	if err != nil || n != 1 || len(fds) != 1 || msg[0] != 'S' {
		fmt.Fprintln(os.Stderr, "child: recv:", n, fds, err)
		return 1
	}
	seg, err := Open(fds[0], 0)
	unix.Close(fds[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 1
	}
	defer seg.Close()
	b := seg.Bytes()
	half := len(b) / 2
	for i := range half {
		if b[i] != pattern(i, 1) {
			fmt.Fprintf(os.Stderr, "child: byte %d = %d, want %d\n", i, b[i], pattern(i, 1))
			return 1
		}
	}
	for i := half; i < len(b); i++ {
		b[i] = pattern(i, 2)
	}
	own, err := Create("child", 8192)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: create:", err)
		return 1
	}
	defer own.Close()
	ob := own.Bytes()
	for i := range ob {
		ob[i] = pattern(i, 3)
	}
	if err := SendFDs(conn, []byte{'C'}, own.FD()); err != nil {
		fmt.Fprintln(os.Stderr, "child: send:", err)
		return 1
	}
	// Wait for the parent to hang up, so our segment outlives its Open.
	_, _ = conn.Read(msg[:])
	return 0
}

func pattern(i, seed int) byte { return byte(i*seed + seed + i/251) }

// waitFlag sleeps on the futex word w until it becomes nonzero.
func waitFlag(w *uint32) {
	for atomic.LoadUint32(w) == 0 {
		_ = Wait(w, 0, 100*time.Millisecond)
	}
}

// countUnderLock increments the plain counter m times, each under l.
func countUnderLock(l *Lock, counter *uint64, m int) error {
	for i := range m {
		if err := l.Lock(context.Background()); err != nil {
			return err
		}
		c := *counter // deliberately not atomic
		if i%16 == 0 {
			runtime.Gosched() // widen the window for a lost update
		}
		*counter = c + 1
		if err := l.Unlock(); err != nil {
			return err
		}
	}
	return nil
}

// child is a running child process (its output kept for the message
// of a failing test).
type child struct{ *remotedev.Captured }

// startChild starts the test binary as a child playing role, with files
// as descriptors 3, 4, …. The test's cleanup kills it if it still runs.
func startChild(t *testing.T, role, arg string, files ...*os.File) *child {
	t.Helper()
	return &child{remotedev.StartCaptured(t, role, arg, files...)}
}

// wait waits for the child to exit and fails the test unless it exited 0.
func (c *child) wait(t *testing.T) {
	t.Helper()
	if err := c.Cmd.Wait(); err != nil {
		t.Fatalf("child %v: %v; output:\n%s", c.Cmd.Env[len(c.Cmd.Env)-1], err, c.Output())
	}
}

// segFile returns a new *os.File for seg's descriptor, for ExtraFiles.
func segFile(t *testing.T, seg *Segment) *os.File {
	t.Helper()
	fd, err := unix.FcntlInt(uintptr(seg.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	t.Cleanup(func() { f.Close() })
	return f
}

// newSeg creates a segment closed at the end of the test.
func newSeg(t *testing.T, size int) *Segment {
	t.Helper()
	seg, err := Create(t.Name(), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	return seg
}

// socketPair returns two connected Unix stream sockets.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// waitUntil polls cond every millisecond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}
