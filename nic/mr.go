package nic

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmakit/rdmakit/verbs"
)

// MR is a memory region: allocated with mmap, off the Go heap (AllocMR),
// or the application's own memory registered in place (RegMR, regmr.go).
type MR struct {
	pd    *PD
	fd    int    // the memfd behind the region, or -1
	owned bool   // the memory is the application's: never unmapped here
	reg   Region // its bytes, address, PD and access, as the resolver sees them
	lkey  uint32
	rkey  uint32
	// refs counts executions using the memory; deregistration subtracts
	// deadBias so new acquisitions fail, then waits for the count to drain
	// before unmapping.
	refs atomic.Int64
	gone atomic.Bool
	// shared is the transport's name for the region when peers map it
	// (SetShared, deposit.go), 0 otherwise.
	shared atomic.Uint64
	free   freeLists // PRISM free lists (freelist.go)
}

const deadBias = 1 << 40

var _ verbs.MR = (*MR)(nil)

// Bytes implements verbs.MR.
func (m *MR) Bytes() []byte { return m.reg.Mem }

// Addr implements verbs.MR.
func (m *MR) Addr() uint64 { return m.reg.Base }

// Len implements verbs.MR.
func (m *MR) Len() int { return len(m.reg.Mem) }

// LKey implements verbs.MR.
func (m *MR) LKey() uint32 { return m.lkey }

// RKey implements verbs.MR.
func (m *MR) RKey() uint32 { return m.rkey }

// Access implements verbs.MR.
func (m *MR) Access() verbs.Access { return m.reg.Access }

// FD returns the memfd holding the region's memory, or -1 when the node
// maps anonymous memory (Config.MemFD). Another process that maps the fd
// (MAP_SHARED, from offset 0) sees the same bytes. The fd stays owned by
// the region and closes at Deregister.
func (m *MR) FD() int { return m.fd }

// PD returns the region's protection domain.
func (m *MR) PD() *PD { return m.pd }

// acquire pins the memory for one execution; it fails once the region is
// being deregistered.
func (m *MR) acquire() bool {
	if m.refs.Add(1) < 0 {
		m.refs.Add(-1)
		return false
	}
	return true
}

func (m *MR) release() {
	if m != nil {
		m.refs.Add(-1)
	}
}

// slice returns the n bytes at address addr if they lie inside the region.
func (m *MR) slice(addr uint64, n uint64) ([]byte, bool) { return m.reg.Slice(addr, n) }

// Deregister implements verbs.MR.
func (m *MR) Deregister() error { return m.deregister(false) }

// deregister deregisters the region. With orphan (the device closing under
// a region its application has not deregistered), the region's pages are
// replaced by fresh anonymous memory instead of being unmapped: a
// goroutine still holding MR.Bytes() reads and writes harmless memory
// rather than faulting the process. Remote access has ended either way.
func (m *MR) deregister(orphan bool) error {
	if !m.gone.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: MR already deregistered", verbs.ErrInvalidState)
	}
	n := m.pd.node
	if n.obs != nil {
		n.obs.RegionRemoved(m)
	}
	n.keys.remove(m)
	m.refs.Add(-deadBias)
	for i := 0; m.refs.Load() != -deadBias; i++ {
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
	n.quiesceQPs() // direct operations do not take references
	m.pd.mrs.Add(-1)
	if m.owned {
		m.reg.Mem = nil // the application's memory: left mapped and untouched
		return nil
	}
	var err error
	if b := m.reg.Mem[:cap(m.reg.Mem)]; orphan && len(b) > 0 {
		_, err = unix.MmapPtr(-1, 0, unsafe.Pointer(&b[0]), uintptr(len(b)),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	} else {
		err = unix.Munmap(b)
	}
	m.reg.Mem = nil
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
	if err != nil {
		return fmt.Errorf("verbs: munmap: %w", err)
	}
	return nil
}

func allocMR(pd *PD, size int, access verbs.Access) (*MR, error) {
	if size <= 0 || uint64(size) > pd.node.attr.MaxMRSize {
		return nil, fmt.Errorf("%w: MR size %d (1 … %d)", verbs.ErrInvalidArg, size, pd.node.attr.MaxMRSize)
	}
	if err := access.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", err, access)
	}
	page := unix.Getpagesize()
	mapped := (size + page - 1) / page * page
	fd := -1
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if pd.node.memfd {
		var err error
		fd, err = unix.MemfdCreate("rdmakit-mr", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			return nil, fmt.Errorf("%w: memfd_create: %v", verbs.ErrNoMemory, err)
		}
		if err := unix.Ftruncate(fd, int64(mapped)); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%w: ftruncate memfd to %d bytes: %v", verbs.ErrNoMemory, mapped, err)
		}
		// Sealed at its size: a process that maps the region can rely on
		// every page staying there (no SIGBUS from a shrunk file).
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%w: seal memfd: %v", verbs.ErrNoMemory, err)
		}
		flags = unix.MAP_SHARED
	}
	buf, err := unix.Mmap(fd, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("%w: mmap %d bytes: %v", verbs.ErrNoMemory, mapped, err)
	}
	m := &MR{
		pd:  pd,
		fd:  fd,
		reg: Region{Mem: buf[:size:mapped], Base: uint64(uintptr(unsafe.Pointer(&buf[0]))), PD: pd.id, Access: access},
	}
	pd.node.keys.add(m)
	pd.mrs.Add(1)
	if o := pd.node.obs; o != nil {
		o.RegionAdded(m)
	}
	return m, nil
}

func random32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("nic: crypto/rand failed: " + err.Error()) // crypto/rand never fails on Linux
	}
	return binary.LittleEndian.Uint32(b[:])
}
