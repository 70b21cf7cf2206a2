package shm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// The deposit segment is the shared memory where a device publishes its
// receive queues for direct deposit (nic/deposit.go): a peer's SEND takes
// the oldest posted receive of the target QP's queue, writes the payload
// into the receive's buffers (regions the peer maps) and leaves the
// receive's completion there, for the device's polling to take up. Every
// device creates one and hands it to the peers that connect to it in its
// WELCOME; they map it read-write.
//
//	offset       size             field
//	0            4                magic "shmD"
//	4            4                layout version
//	8            8                size
//	128          4                pending: a depositor sets it after it
//	                              commits; the device clears it and takes
//	                              the completions up
//	depTableOff  QPSlots × 16 B   deposit table, by QP slot: qpn<<32|gen,
//	                              then the area's offset (0: none)
//	depAreasOff  …                areas, 64-byte aligned
//
// An area (one per published receive queue: an RC QP's own, or an SRQ's):
//
//	0    16   robust lock (shmem.Lock): every consumer of the queue takes it
//	16   4    journal valid: a deposit is in progress
//	20   4    gen: the area's generation (0 once withdrawn); the table
//	          entry's gen must match it
//	24   8    journal: consumed before the deposit
//	32   8    journal: completion tail before the deposit
//	40   4    cap: entries of each ring below (a power of two)
//	44   4    broken: the device found garbage; no more deposits
//	64   8    posted: receives posted up to here (the device writes it)
//	128  8    consumed: receives consumed up to here (under the lock)
//	192  8    ctail: completions written up to here (under the lock)
//	256  8    chead: completions taken up to here (the device writes it)
//	320  …    cap receive descriptors of 128 B: flags(u32: 1 = peers may
//	          deposit, nsge<<8) _(u32) wr_id(u64) then up to 4 buffers of
//	          slot(u32) len(u32) live(u64) offset(u64) — a region of the
//	          device's region table, by slot and live word, as peers map it
//	…    …    cap completions of 32 B: wr_id(u64) qpn(u32) src_qpn(u32)
//	          byte_len(u32) imm(u32) flags(u32: 1 imm, 2 solicited)
//	          src_id(u32)
//
// A deposit, under the lock: check gen, broken and the QP's table words
// again; find consumed < posted, a depositable descriptor large enough
// and room for a completion; journal consumed and ctail; copy the payload;
// write the completion; store ctail+1, then consumed+1; clear the
// journal; unlock; set pending and ring the device's bell. The next locker
// after a depositor died repairs from the journal: a completion written
// (ctail moved) with consumed not yet moved is completed; otherwise
// nothing was published and the receive stays posted — never lost, never
// completed twice.
const (
	depMagic    = 0x446d6873 // "shmD"
	depVersion  = 1
	offPending  = 128
	depTableOff = 4096
	depEntry    = 16
	depAreasOff = depTableOff + QPSlots*depEntry
	// depSize is the deposit segment's size: a sparse memfd, so only the
	// areas in use take memory.
	depSize = 64 << 20

	aLock     = 0
	aJValid   = 16
	aGen      = 20
	aJHead    = 24
	aJCTail   = 32
	aCap      = 40
	aBroken   = 44
	aPosted   = 64
	aConsumed = 128
	aCTail    = 192
	aCHead    = 256
	aHeader   = 320
	descSize  = 128
	compSize  = 32
	// maxAreaCap bounds an area's rings.
	maxAreaCap = 1 << 16
	// depSegs is how many buffers a depositable receive may have.
	depSegs = 4
)

// areaSize is the bytes of an area of cap entries, 64-byte aligned.
func areaSize(cap int) int { return (aHeader + cap*(descSize+compSize) + 63) &^ 63 }

// depSeg is a view of a deposit segment, own or a peer's.
type depSeg struct {
	seg *shmem.Segment
	b   []byte

	// The device's own: the area allocator.
	mu   sync.Mutex
	next int
	free map[int][]int // by size: offsets of withdrawn areas
	gen  uint32
}

func newDepSeg(name string) (*depSeg, error) {
	seg, err := shmem.Create("rdmakit-shm-dep-"+name, depSize)
	if err != nil {
		return nil, err
	}
	b := seg.Bytes()
	binary.LittleEndian.PutUint32(b[0:], depMagic)
	binary.LittleEndian.PutUint32(b[4:], depVersion)
	binary.LittleEndian.PutUint64(b[8:], depSize)
	return &depSeg{seg: seg, b: b, next: depAreasOff, free: map[int][]int{}}, nil
}

// openDepSeg maps a peer's deposit segment and validates it.
func openDepSeg(fd int) (*depSeg, error) {
	seg, err := shmem.Open(fd, depSize)
	if err != nil {
		return nil, fmt.Errorf("%w: deposit segment: %w", ErrProtocol, err)
	}
	b := seg.Bytes()
	if !seg.Sealed() || len(b) != depSize || binary.LittleEndian.Uint32(b[0:]) != depMagic ||
		binary.LittleEndian.Uint32(b[4:]) != depVersion {
		seg.Close()
		return nil, fmt.Errorf("%w: deposit segment unsealed, or of another size or layout", ErrProtocol)
	}
	return &depSeg{seg: seg, b: b}, nil
}

func (s *depSeg) close() error { return s.seg.Close() }

func (s *depSeg) pending() *uint32 { return u32(s.b, offPending) }

// entry returns the two words of qpn's slot in the deposit table.
func (s *depSeg) entry(qpn uint32) (w0, w1 *uint64) {
	o := depTableOff + int(qpn%QPSlots)*depEntry
	return u64(s.b, o), u64(s.b, o+8)
}

// area returns the area at off, checked against the segment's bounds
// with the capacity its header claims, or nil: the offset and the header
// come from shared memory.
func (s *depSeg) area(off uint64) ([]byte, uint64) {
	if off < depAreasOff || off%64 != 0 || off > uint64(len(s.b))-aHeader {
		return nil, 0
	}
	c := uint64(atomic.LoadUint32(u32(s.b, int(off)+aCap)))
	if c == 0 || c > maxAreaCap || c&(c-1) != 0 || off+uint64(areaSize(int(c))) > uint64(len(s.b)) {
		return nil, 0
	}
	return s.b[off : off+uint64(areaSize(int(c))) : off+uint64(areaSize(int(c)))], c
}

// alloc reserves an area of cap entries and formats it with a new
// generation; off < 0 when the segment is full.
func (s *depSeg) alloc(cap int) (off int, gen uint32) {
	size := areaSize(cap)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.free[size]; len(f) > 0 {
		off = f[len(f)-1]
		s.free[size] = f[:len(f)-1]
	} else {
		if s.next+size > len(s.b) {
			return -1, 0
		}
		off = s.next
		s.next += size
	}
	s.gen++
	if s.gen == 0 {
		s.gen = 1
	}
	return off, s.gen
}

// release returns an area to the allocator.
func (s *depSeg) release(off, cap int) {
	s.mu.Lock()
	size := areaSize(cap)
	s.free[size] = append(s.free[size], off)
	s.mu.Unlock()
}

// repairArea brings an area back to a consistent state after a holder of
// its lock died (the caller holds the lock now): see the layout above.
// It reads only words, indexes nothing, so garbage cannot fault it.
func repairArea(a []byte) {
	if atomic.LoadUint32(u32(a, aJValid)) == 0 {
		return
	}
	h0, t0 := atomic.LoadUint64(u64(a, aJHead)), atomic.LoadUint64(u64(a, aJCTail))
	if atomic.LoadUint64(u64(a, aCTail)) == t0+1 && atomic.LoadUint64(u64(a, aConsumed)) == h0 {
		atomic.StoreUint64(u64(a, aConsumed), h0+1) // the completion is out: finish
	}
	atomic.StoreUint32(u32(a, aJValid), 0)
}
