package shmem

import (
	"errors"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// openFDs counts the calling process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

func TestSendRecvFDs(t *testing.T) {
	a, b := socketPair(t)
	s1, s2 := newSeg(t, 4096), newSeg(t, 8192)
	s1.Bytes()[0], s2.Bytes()[0] = 11, 22
	payload := []byte("hello")
	if err := SendFDs(a, payload, s1.FD(), s2.FD()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, fds, err := RecvFDs(b, buf, 4)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "hello" || len(fds) != 2 {
		t.Fatalf("got %q and %d fds", buf[:n], len(fds))
	}
	for i, want := range []struct {
		size int
		b0   byte
	}{{4096, 11}, {8192, 22}} {
		if fds[i] == s1.FD() || fds[i] == s2.FD() {
			t.Errorf("fd %d is not a new descriptor", fds[i])
		}
		if flags, err := unix.FcntlInt(uintptr(fds[i]), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd %d: flags %#x err %v, want close-on-exec", fds[i], flags, err)
		}
		seg, err := Open(fds[i], 0)
		unix.Close(fds[i])
		if err != nil {
			t.Fatal(err)
		}
		if seg.Size() != want.size || seg.Bytes()[0] != want.b0 {
			t.Errorf("fd %d maps size %d byte %d", i, seg.Size(), seg.Bytes()[0])
		}
		seg.Close()
	}

	// Payload only, no descriptors.
	if err := SendFDs(a, []byte{7}); err != nil {
		t.Fatal(err)
	}
	n, fds, err = RecvFDs(b, buf, 4)
	if err != nil || n != 1 || buf[0] != 7 || fds != nil {
		t.Fatalf("plain message: n %d fds %v err %v", n, fds, err)
	}
}

func TestSendFDsBadArguments(t *testing.T) {
	a, _ := socketPair(t)
	if err := SendFDs(a, nil, 0); err == nil {
		t.Error("empty payload accepted")
	}
	if err := SendFDs(a, []byte{1}, -1); err == nil {
		t.Error("negative descriptor accepted")
	}
	if err := SendFDs(a, []byte{1}, make([]int, MaxFDs+1)...); err == nil {
		t.Error("too many descriptors accepted")
	}
	if err := SendFDs(nil, []byte{1}); err == nil {
		t.Error("nil connection accepted")
	}
	if _, _, err := RecvFDs(a, nil, 1); err == nil {
		t.Error("empty receive buffer accepted")
	}
	if _, _, err := RecvFDs(a, []byte{0}, -1); err == nil {
		t.Error("negative maxFDs accepted")
	}
}

// TestRecvFDsTooManyClosesAll checks that a message carrying more
// descriptors than the receiver accepts is an error that leaks nothing.
func TestRecvFDsTooManyClosesAll(t *testing.T) {
	a, b := socketPair(t)
	s := newSeg(t, 4096)
	buf := make([]byte, 4)
	for _, tc := range []struct {
		sent, max int
	}{{3, 1}, {5, 2}, {1, 0}, {MaxFDs, 16}} {
		fds := make([]int, tc.sent)
		for i := range fds {
			fds[i] = s.FD()
		}
		before := openFDs(t)
		if err := SendFDs(a, []byte{1}, fds...); err != nil {
			t.Fatal(err)
		}
		n, got, err := RecvFDs(b, buf, tc.max)
		if err == nil || got != nil || n != 0 {
			t.Errorf("sent %d, max %d: n %d fds %v err %v; want an error", tc.sent, tc.max, n, got, err)
		}
		if after := openFDs(t); after != before {
			t.Errorf("sent %d, max %d: %d descriptors open before, %d after", tc.sent, tc.max, before, after)
		}
	}
}

func TestRecvFDsEOF(t *testing.T) {
	a, b := socketPair(t)
	a.Close()
	if _, _, err := RecvFDs(b, make([]byte, 1), 1); !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want EOF", err)
	}
}
