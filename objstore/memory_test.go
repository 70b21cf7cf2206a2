package objstore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProvidedMemory runs a store in memory its caller owns
// (Config.Memory): objects land in it, clients map it, and the store's
// Close leaves it mapped and its fd open.
func TestProvidedMemory(t *testing.T) {
	const size = 4 << 20
	fd, err := unix.MemfdCreate("objstore-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)

	if _, err := NewStore(Config{Mem: 2 * size, Memory: &Memory{Bytes: mem, FD: fd}}); !errors.Is(err, ErrBadSize) {
		t.Fatalf("a store larger than its memory: %v, want ErrBadSize", err)
	}
	s := newTestStoreConfig(t, Config{Mem: size, Memory: &Memory{Bytes: mem, FD: fd}, Logger: testLogger(t)})
	c := connect(t, s)
	ctx := context.Background()
	id := NewID()
	data := bytes.Repeat([]byte("plasma"), 1000)
	b, err := c.Create(ctx, id, len(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, data)
	if err := c.Seal(ctx, id); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mem, data) {
		t.Fatal("the object's bytes are not in the provided memory")
	}
	got, err := c.Get(ctx, []ID{id}, 0)
	if err != nil || got[0] == nil || !bytes.Equal(got[0].Data, data) {
		t.Fatalf("Get: %v %v", got, err)
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mem, data) {
		t.Fatal("the provided memory changed at Close")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the provided fd was closed: %v", err)
	}
}
