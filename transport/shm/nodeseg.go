package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// The node segment is the shared memory every shm device publishes to the
// peers that connect to it (they map it read-write). It holds what an
// initiator in another process needs to act on the device's memory
// without the device's CPU, and the device's doorbell:
//
//	offset      size     field
//	0           4        magic "shmN"
//	4           4        layout version
//	8           8        owner: the device process's ProcessID
//	128         4        parked: 1 while the device's NIC goroutine sleeps on bell
//	256         4        bell: futex word, bumped by a peer that wakes the device
//	qpTableOff  32 KiB   QP table: QPSlots × u64
//	mrTableOff  256 KiB  region table: MRSlots × 64 B
//	lockOff     512 KiB  atomics lock table: nic.LockStripes × 128 B
//	peerOff     32 KiB   QP peer table: QPSlots × u64
//
// A QP table word is qpn<<32 | state<<24 | access<<16 | pd, at slot
// qpn mod QPSlots; a slot whose qpn differs is unknown to the reader
// (which then sends its request over the ring, where the device decides).
// The peer table word of the same slot is destQPN<<32 | addrTag(Dest):
// the QP the slot's RC QP is connected to and a tag of that QP's device
// address, 0 when not connected. An initiator runs a request directly
// only if the word names its own QP and address (nic's tenant isolation);
// otherwise the request goes over the ring, where the device decides and
// drops it. The device writes it before the QP word.
//
// A region entry is live(u64) rkey(u32) pd(u32) access(u32) _(u32)
// base(u64) len(u64): live is gen<<1|1 while the region is registered
// and gen<<1 after; gen counts the slot's registrations, so a stale
// mapping never matches a later region in the same slot. The device
// writes the other fields before it stores live.
//
// A lock stripe is a robust shmem.Lock (16 B) followed by its journal:
// valid(u32) words(u32) rkey(u32) _(u32) addr(u64) old[4](u64) — the
// original words of a 16- or 32-byte atomic in progress, restored by the
// next owner if the holder died before it unlocked.
const (
	segMagic   = 0x4e6d6873 // "shmN"
	segVersion = 2

	offOwner  = 8
	offParked = 128
	offBell   = 256

	// QPSlots is the size of the QP table.
	QPSlots    = 4096
	qpTableOff = 4096
	// MRSlots is the size of the region table: the most regions a device
	// can publish at once (more are served over the ring only).
	MRSlots    = 4096
	mrEntry    = 64
	mrTableOff = qpTableOff + QPSlots*8
	lockStripe = 128
	lockOff    = mrTableOff + MRSlots*mrEntry
	peerOff    = lockOff + 4096*lockStripe
	// segSize is the node segment's size.
	segSize = peerOff + QPSlots*8
)

// nodeSeg is a view of a node segment, own or a peer's.
type nodeSeg struct {
	seg *shmem.Segment
	b   []byte
}

// newNodeSeg creates and formats this device's node segment.
func newNodeSeg(name string) (*nodeSeg, error) {
	seg, err := shmem.Create("rdmakit-shm-node-"+name, segSize)
	if err != nil {
		return nil, err
	}
	b := seg.Bytes()
	binary.LittleEndian.PutUint32(b[0:], segMagic)
	binary.LittleEndian.PutUint32(b[4:], segVersion)
	atomic.StoreUint64(u64(b, offOwner), uint64(shmem.Self()))
	return &nodeSeg{seg: seg, b: b}, nil
}

// openNodeSeg maps a peer's node segment from its fd and validates it.
func openNodeSeg(fd int) (*nodeSeg, error) {
	seg, err := shmem.Open(fd, segSize)
	if err != nil {
		return nil, fmt.Errorf("%w: node segment: %w", ErrProtocol, err)
	}
	if !seg.Sealed() {
		seg.Close()
		return nil, fmt.Errorf("%w: node segment not sealed against shrinking", ErrProtocol)
	}
	b := seg.Bytes()
	if binary.LittleEndian.Uint32(b[0:]) != segMagic || binary.LittleEndian.Uint32(b[4:]) != segVersion {
		seg.Close()
		return nil, fmt.Errorf("%w: node segment magic %#x version %d", ErrProtocol,
			binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint32(b[4:]))
	}
	return &nodeSeg{seg: seg, b: b}, nil
}

func (s *nodeSeg) close() error { return s.seg.Close() }

func u64(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }
func u32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

func (s *nodeSeg) parked() *uint32 { return u32(s.b, offParked) }
func (s *nodeSeg) bell() *uint32   { return u32(s.b, offBell) }

// ring wakes the segment's device if its NIC goroutine sleeps. The load
// keeps the common case (it does not) to a read of a shared cache line.
func (s *nodeSeg) ring() {
	p := s.parked()
	if atomic.LoadUint32(p) != 0 && atomic.SwapUint32(p, 0) != 0 {
		atomic.AddUint32(s.bell(), 1)
		_, _ = shmem.Wake(s.bell(), 1)
	}
}

// qpWord is the QP table word of qpn.
func (s *nodeSeg) qpWord(qpn uint32) *uint64 {
	return u64(s.b, qpTableOff+int(qpn%QPSlots)*8)
}

// qpPeer is the peer table word of qpn's slot.
func (s *nodeSeg) qpPeer(qpn uint32) *uint64 {
	return u64(s.b, peerOff+int(qpn%QPSlots)*8)
}

func packPeer(destQPN, tag uint32) uint64 { return uint64(destQPN)<<32 | uint64(tag) }

// addrTag names a device address in the peer table: its 32-bit FNV-1a
// hash, never 0 (a QP that is not connected). Two addresses with one tag
// would let a misconnected request whose QP number is also the expected
// one run directly; shm peers map the device's regions anyway, so the
// table is a statement of the rule, not a security boundary.
func addrTag(address string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(address); i++ {
		h ^= uint32(address[i])
		h *= 16777619
	}
	return max(h, 1)
}

func packQP(qpn uint32, state uint8, access uint8, pd uint16) uint64 {
	return uint64(qpn)<<32 | uint64(state)<<24 | uint64(access)<<16 | uint64(pd)
}

// mrEntry fields.
func (s *nodeSeg) mrLive(idx uint32) *uint64 { return u64(s.b, mrTableOff+int(idx)*mrEntry) }

type mrInfo struct {
	rkey, pd, access uint32
	base, length     uint64
}

func (s *nodeSeg) readMR(idx uint32) mrInfo {
	o := mrTableOff + int(idx)*mrEntry
	return mrInfo{
		rkey:   atomic.LoadUint32(u32(s.b, o+8)),
		pd:     atomic.LoadUint32(u32(s.b, o+12)),
		access: atomic.LoadUint32(u32(s.b, o+16)),
		base:   atomic.LoadUint64(u64(s.b, o+24)),
		length: atomic.LoadUint64(u64(s.b, o+32)),
	}
}

func (s *nodeSeg) writeMR(idx uint32, m mrInfo, live uint64) {
	o := mrTableOff + int(idx)*mrEntry
	atomic.StoreUint32(u32(s.b, o+8), m.rkey)
	atomic.StoreUint32(u32(s.b, o+12), m.pd)
	atomic.StoreUint32(u32(s.b, o+16), m.access)
	atomic.StoreUint64(u64(s.b, o+24), m.base)
	atomic.StoreUint64(u64(s.b, o+32), m.length)
	atomic.StoreUint64(s.mrLive(idx), live)
}

// stripe returns lock stripe i's bytes.
func (s *nodeSeg) stripe(i uint32) []byte {
	o := lockOff + int(i)*lockStripe
	return s.b[o : o+lockStripe : o+lockStripe]
}
