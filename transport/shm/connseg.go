package shm

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rdmakit/rdmakit/transport/shm/internal/ring"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// The connection segment is created by the dialer and holds a
// connection's two rings:
//
//	offset     size            field
//	0          4               magic "shmR"
//	4          4               layout version
//	8          8               ring capacity
//	128        4               respBlocked: the device's session set it when
//	                           the response ring was too full to serve; the
//	                           dialer clears it and rings the device's bell
//	                           once it has consumed responses
//	256        8               active: odd while the dialer runs a PRISM
//	                           operation directly on the device's memory
//	                           (nic.DirectLink.Enter/Exit); the device's
//	                           MR.Quiesce waits for it to move
//	4096       ring.Size(cap)  request ring: dialer → device
//	respOff    ring.Size(cap)  response ring: device → dialer
const (
	connMagic      = 0x526d6873 // "shmR"
	connVersion    = 1
	offRespBlocked = 128
	offActive      = 256
	connHeader     = 4096
)

// connLayout returns the response ring's offset and the segment size for
// rings of capacity cap.
func connLayout(cap int) (respOff, size int) {
	r := (ring.Size(cap) + 4095) &^ 4095
	return connHeader + r, connHeader + 2*r
}

// connRings is one side's view of a connection segment.
type connRings struct {
	seg     *shmem.Segment
	blocked *uint32
	active  *uint64
	req     *ring.Ring
	resp    *ring.Ring
}

// newConnSeg creates a connection segment with empty rings.
func newConnSeg(name string, cap int) (*connRings, error) {
	respOff, size := connLayout(cap)
	seg, err := shmem.Create("rdmakit-shm-conn-"+name, size)
	if err != nil {
		return nil, err
	}
	b := seg.Bytes()
	binary.LittleEndian.PutUint32(b[0:], connMagic)
	binary.LittleEndian.PutUint32(b[4:], connVersion)
	binary.LittleEndian.PutUint64(b[8:], uint64(cap))
	req, err1 := ring.Init(b[connHeader : connHeader+ring.Size(cap)])
	resp, err2 := ring.Init(b[respOff : respOff+ring.Size(cap)])
	if err1 != nil || err2 != nil {
		seg.Close()
		return nil, fmt.Errorf("shm: format rings: %v %v", err1, err2)
	}
	return &connRings{seg: seg, blocked: u32(b, offRespBlocked), active: u64(b, offActive), req: req, resp: resp}, nil
}

// openConnSeg maps a connection segment a dialer sent and validates it.
func openConnSeg(fd int, maxCap int) (*connRings, error) {
	var st [connHeader]byte
	n, err := preadFull(fd, st[:])
	if err != nil || n < 16 {
		return nil, fmt.Errorf("%w: connection segment header: %v", ErrProtocol, err)
	}
	if binary.LittleEndian.Uint32(st[0:]) != connMagic || binary.LittleEndian.Uint32(st[4:]) != connVersion {
		return nil, fmt.Errorf("%w: connection segment magic or version", ErrProtocol)
	}
	c := binary.LittleEndian.Uint64(st[8:])
	if c < ring.MinCapacity || c > uint64(maxCap) || c&(c-1) != 0 {
		return nil, fmt.Errorf("%w: ring capacity %d", ErrProtocol, c)
	}
	cap := int(c)
	respOff, size := connLayout(cap)
	seg, err := shmem.Open(fd, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if !seg.Sealed() {
		seg.Close()
		return nil, fmt.Errorf("%w: connection segment not sealed against shrinking", ErrProtocol)
	}
	b := seg.Bytes()
	req, err1 := ring.Attach(b[connHeader : connHeader+ring.Size(cap)])
	resp, err2 := ring.Attach(b[respOff : respOff+ring.Size(cap)])
	if err1 != nil || err2 != nil || req.Capacity() != cap || resp.Capacity() != cap {
		seg.Close()
		return nil, fmt.Errorf("%w: rings: %v %v", ErrProtocol, err1, err2)
	}
	return &connRings{seg: seg, blocked: u32(b, offRespBlocked), active: u64(b, offActive), req: req, resp: resp}, nil
}

// preadFull reads len(b) bytes from the start of the file fd.
func preadFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], int64(n))
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
