package objstore

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// punchMin is the smallest page-aligned run a release gives back to the
// kernel: smaller runs keep their pages (a hole punch costs a syscall).
const punchMin = 64 << 10

// arena is the store's memory: one memfd of size bytes mapped shared.
// Pages cost nothing until touched; released runs are punched out of the
// file, so the arena's resident size follows what the objects use.
type arena struct {
	fd   int
	mem  []byte
	size int64
}

func newArena(size int64) (*arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: arena of %d bytes", ErrBadSize, size)
	}
	fd, err := unix.MemfdCreate("rdmakit-objstore", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("objstore: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("objstore: ftruncate arena to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("objstore: mmap arena of %d bytes: %w", size, err)
	}
	return &arena{fd: fd, mem: mem, size: size}, nil
}

// punch gives the whole pages inside s back to the kernel when there are
// at least punchMin bytes of them. Reads of a punched page see zeros.
func (a *arena) punch(s span) error {
	page := int64(os.Getpagesize())
	lo := (s.off + page - 1) &^ (page - 1)
	hi := (s.off + s.n) &^ (page - 1)
	if hi-lo < punchMin {
		return nil
	}
	if err := unix.Fallocate(a.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, lo, hi-lo); err != nil {
		return fmt.Errorf("objstore: punch hole [%d, %d): %w", lo, hi, err)
	}
	return nil
}

// resident is the number of the arena's bytes in memory now (mincore).
func (a *arena) resident() (int64, error) {
	page := os.Getpagesize()
	vec := make([]byte, (len(a.mem)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&a.mem[0])), uintptr(len(a.mem)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, fmt.Errorf("objstore: mincore: %w", errno)
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page), nil
}

func (a *arena) close() error {
	err := unix.Munmap(a.mem)
	if cerr := unix.Close(a.fd); err == nil {
		err = cerr
	}
	return err
}
