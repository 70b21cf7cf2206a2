package shmem

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCreateRejectsBadSize(t *testing.T) {
	for _, size := range []int{0, -1} {
		if seg, err := Create("bad", size); err == nil {
			seg.Close()
			t.Errorf("Create(size %d) succeeded", size)
		}
	}
}

func TestSegmentTwoMappings(t *testing.T) {
	a := newSeg(t, 3*4096+100)
	if a.Size() != 3*4096+100 || len(a.Bytes()) != a.Size() {
		t.Fatalf("size %d, len %d", a.Size(), len(a.Bytes()))
	}
	if !a.Sealed() {
		t.Error("created segment is not sealed")
	}
	for i, c := range a.Bytes() {
		if c != 0 {
			t.Fatalf("fresh byte %d = %d", i, c)
		}
	}
	b, err := Open(a.FD(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Size() != a.Size() || b.FD() == a.FD() {
		t.Fatalf("open: size %d fd %d (creator size %d fd %d)", b.Size(), b.FD(), a.Size(), a.FD())
	}
	if &a.Bytes()[0] == &b.Bytes()[0] {
		t.Fatal("second mapping has the same address")
	}
	ab, bb := a.Bytes(), b.Bytes()
	for i := range ab {
		ab[i] = pattern(i, 1)
	}
	for i := range bb {
		if bb[i] != pattern(i, 1) {
			t.Fatalf("mapping b byte %d = %d, want %d", i, bb[i], pattern(i, 1))
		}
		bb[i] = pattern(i, 2)
	}
	for i := range ab {
		if ab[i] != pattern(i, 2) {
			t.Fatalf("mapping a byte %d = %d, want %d", i, ab[i], pattern(i, 2))
		}
	}

	// A partial mapping; closing it leaves the creator's fd alone.
	c, err := Open(a.FD(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != 4096 || c.Bytes()[10] != pattern(10, 2) {
		t.Fatalf("partial mapping: size %d", c.Size())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(a.FD(), &st); err != nil {
		t.Fatalf("creator fd closed by Open/Close of a copy: %v", err)
	}
}

func TestSegmentOpenErrors(t *testing.T) {
	a := newSeg(t, 4096)
	if _, err := Open(a.FD(), 4097); err == nil {
		t.Error("Open beyond the file size succeeded")
	}
	if _, err := Open(-1, 0); err == nil {
		t.Error("Open(-1) succeeded")
	}
	if _, err := Open(a.FD(), -1); err == nil {
		t.Error("Open(size -1) succeeded")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := Open(int(r.Fd()), 4096); err == nil {
		t.Error("Open(pipe) succeeded")
	}
}

func TestSegmentSealsPreventResize(t *testing.T) {
	a := newSeg(t, 8192)
	if err := unix.Ftruncate(a.FD(), 4096); !errors.Is(err, unix.EPERM) {
		t.Errorf("shrink: %v, want EPERM", err)
	}
	if err := unix.Ftruncate(a.FD(), 16384); !errors.Is(err, unix.EPERM) {
		t.Errorf("grow: %v, want EPERM", err)
	}
}

func TestSegmentCloseIdempotent(t *testing.T) {
	a, err := Create("close", 4096)
	if err != nil {
		t.Fatal(err)
	}
	fd := a.FD()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if a.Bytes() != nil || a.FD() != -1 || a.Sealed() {
		t.Error("closed segment still exposes memory or descriptor")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil {
		t.Error("descriptor still open after Close")
	}
}

func TestWordAt(t *testing.T) {
	a := newSeg(t, 64)
	b := a.Bytes()
	if _, err := Uint32At(b[4:]); err != nil {
		t.Errorf("Uint32At(4): %v", err)
	}
	if _, err := Uint64At(b[8:]); err != nil {
		t.Errorf("Uint64At(8): %v", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"u32 misaligned", func() error { _, err := Uint32At(b[2:]); return err }()},
		{"u32 short", func() error { _, err := Uint32At(b[60:63]); return err }()},
		{"u64 misaligned", func() error { _, err := Uint64At(b[4:]); return err }()},
		{"u64 short", func() error { _, err := Uint64At(b[56:63]); return err }()},
		{"u64 empty", func() error { _, err := Uint64At(b[64:]); return err }()},
	} {
		if !errors.Is(tc.err, ErrMisaligned) {
			t.Errorf("%s: %v, want ErrMisaligned", tc.name, tc.err)
		}
	}
}

// TestSegmentAcrossProcesses passes a segment to a child over a Unix
// socket, checks that each side sees the other's writes, and maps a
// segment the child created and sent back.
func TestSegmentAcrossProcesses(t *testing.T) {
	seg := newSeg(t, 2*4096)
	b := seg.Bytes()
	half := len(b) / 2
	for i := range half {
		b[i] = pattern(i, 1)
	}
	mine, theirs := socketPair(t)
	f, err := theirs.File()
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "exchange", "", f)
	f.Close()
	theirs.Close()

	if err := SendFDs(mine, []byte{'S'}, seg.FD()); err != nil {
		t.Fatal(err)
	}
	var msg [8]byte
	n, fds, err := RecvFDs(mine, msg[:], 1)
	if err != nil || n != 1 || msg[0] != 'C' || len(fds) != 1 {
		t.Fatalf("recv from child: n %d fds %v err %v; child output:\n%s", n, fds, err, c.Output())
	}
	// The child wrote its half before sending.
	for i := half; i < len(b); i++ {
		if b[i] != pattern(i, 2) {
			t.Fatalf("byte %d = %d, want the child's %d", i, b[i], pattern(i, 2))
		}
	}
	other, err := Open(fds[0], 0)
	unix.Close(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Size() != 8192 || !other.Sealed() {
		t.Fatalf("child's segment: size %d sealed %v", other.Size(), other.Sealed())
	}
	for i, v := range other.Bytes() {
		if v != pattern(i, 3) {
			t.Fatalf("child's segment byte %d = %d, want %d", i, v, pattern(i, 3))
		}
	}
	mine.Close()
	c.wait(t)
	// The child is gone; its segment lives on in our mapping.
	if other.Bytes()[100] != pattern(100, 3) {
		t.Fatal("child's segment changed after the child exited")
	}
}
