package shmem

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Segment is memory shared between processes: a memfd mapped MAP_SHARED
// and read-write. Create makes a new one; Open maps a descriptor received
// from a peer. A Segment is safe for concurrent use; the bytes it maps
// follow the memory model of the package documentation.
type Segment struct {
	mu   sync.Mutex
	fd   int
	mem  []byte
	size int
}

// seals are the memfd seals Create applies: the size can never change, so
// no peer can shrink the file under another peer's mapping (which would
// make that peer's accesses fault with SIGBUS), and the seals themselves
// are final.
const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Create makes a shared memory segment of size bytes: a memfd named name
// (the name is only for /proc/PID/fd and debugging; it need not be unique)
// created close-on-exec, sized with ftruncate, sealed against shrinking
// and growing, and mapped MAP_SHARED. The memory is zero.
func Create(name string, size int) (*Segment, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shmem: create %q: size %d must be positive", name, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("ftruncate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl(F_ADD_SEALS)", err)
	}
	return mapFD(fd, size)
}

// Open maps a segment from fd, typically a memfd received with RecvFDs.
// Open duplicates fd, so the caller keeps ownership of fd and may close it
// as soon as Open returns. size is the number of bytes to map, at most the
// file's size; size 0 maps the whole file.
//
// A file that is not sealed against shrinking (see Create) can be
// truncated by whoever else holds it, after which touching the lost pages
// raises SIGBUS; Sealed reports whether the segment is safe from that.
func Open(fd int, size int) (*Segment, error) {
	if fd < 0 {
		return nil, fmt.Errorf("shmem: open: bad descriptor %d", fd)
	}
	if size < 0 {
		return nil, fmt.Errorf("shmem: open: size %d is negative", size)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, os.NewSyscallError("fstat", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("shmem: open: descriptor %d is not a regular file or memfd", fd)
	}
	if size == 0 {
		if st.Size <= 0 || st.Size > int64(maxInt) {
			return nil, fmt.Errorf("shmem: open: file size %d cannot be mapped", st.Size)
		}
		size = int(st.Size)
	} else if int64(size) > st.Size {
		return nil, fmt.Errorf("shmem: open: size %d exceeds the file size %d", size, st.Size)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err)
	}
	return mapFD(dup, size)
}

const maxInt = int(^uint(0) >> 1)

// mapFD maps size bytes of fd, which it owns: on error it closes fd.
func mapFD(fd, size int) (*Segment, error) {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("mmap", err)
	}
	return &Segment{fd: fd, mem: mem, size: size}, nil
}

// Bytes returns the mapped memory. The slice stays valid until Close;
// touching it after Close is the caller's bug and faults (the pages are
// unmapped). After Close, Bytes returns nil.
func (s *Segment) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem
}

// FD returns the segment's own descriptor, to be sent to peers with
// SendFDs. It stays owned by the Segment: do not close it. After Close FD
// returns -1.
func (s *Segment) FD() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd
}

// Size returns the number of mapped bytes.
func (s *Segment) Size() int { return s.size }

// Sealed reports whether the segment's file is sealed against shrinking,
// so no process can make accesses to the mapping fault. Segments made by
// Create are sealed.
func (s *Segment) Sealed() bool {
	fd := s.FD()
	if fd < 0 {
		return false
	}
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	return err == nil && got&unix.F_SEAL_SHRINK != 0
}

// Close unmaps the memory and closes the descriptor. It is idempotent:
// later calls return nil. Other processes' mappings are unaffected; the
// memory is freed when the last mapping and descriptor are gone.
func (s *Segment) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	if err != nil {
		err = os.NewSyscallError("munmap", err)
	}
	if cerr := unix.Close(s.fd); cerr != nil {
		err = errors.Join(err, os.NewSyscallError("close", cerr))
	}
	s.mem, s.fd = nil, -1
	return err
}

// Uint32At returns a pointer to the 4-byte word at the start of b, for use
// with sync/atomic and the futex calls. b must hold at least 4 bytes and
// start at a 4-byte aligned address.
func Uint32At(b []byte) (*uint32, error) {
	if err := checkWord(b, 4); err != nil {
		return nil, err
	}
	return (*uint32)(unsafe.Pointer(&b[0])), nil
}

// Uint64At returns a pointer to the 8-byte word at the start of b, for use
// with sync/atomic. b must hold at least 8 bytes and start at an 8-byte
// aligned address.
func Uint64At(b []byte) (*uint64, error) {
	if err := checkWord(b, 8); err != nil {
		return nil, err
	}
	return (*uint64)(unsafe.Pointer(&b[0])), nil
}

// ErrMisaligned is returned (wrapped) when memory for a word or a Lock is
// too short or not aligned.
var ErrMisaligned = errors.New("shmem: memory too short or misaligned")

func checkWord(b []byte, size int) error {
	if len(b) < size {
		return fmt.Errorf("%w: %d bytes, need %d", ErrMisaligned, len(b), size)
	}
	if p := uintptr(unsafe.Pointer(&b[0])); p%uintptr(size) != 0 {
		return fmt.Errorf("%w: address %#x is not %d-byte aligned", ErrMisaligned, p, size)
	}
	return nil
}
