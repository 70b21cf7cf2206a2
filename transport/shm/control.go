package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// The control channel of a connection is a SOCK_SEQPACKET Unix socket in
// the abstract namespace (@rdmakit-shm/NAME): one message per packet, each
//
//	magic u32 "shmC" | version u16 | kind u8 | 0 u8 | body
//
// little-endian, with descriptors attached as SCM_RIGHTS where noted:
//
//	HELLO   dialer → device: ring capacity u32, the dialer's address;
//	        fds: the connection segment (both rings), the dialer's node segment
//	WELCOME device → dialer: the dialer's peer id u32, the device's address;
//	        fds: the device's node segment, its deposit segment (depseg.go)
//	REJECT  device → dialer: the reason
//	REGION  device → dialer: table slot u32, live u64; fd: the region's memfd
//	REVOKE  device → dialer: table slot u32, live u64
//
// Data never goes over the socket: requests and responses use the rings,
// one-sided operations the mapped regions. The socket's end also tells
// either side at once that the other process is gone.
const (
	ctlMagic   = 0x436d6873 // "shmC"
	ctlVersion = 2
	ctlHeader  = 8
	maxCtl     = 512

	ctlHello   = 1
	ctlWelcome = 2
	ctlReject  = 3
	ctlRegion  = 4
	ctlRevoke  = 5
)

// Errors of the control protocol.
var (
	// ErrProtocol: a peer sent something malformed or unexpected; the
	// connection is closed, others are unaffected.
	ErrProtocol = errors.New("shm: protocol error")
	// ErrRejected: the device refused the connection.
	ErrRejected = errors.New("shm: connection rejected")
)

// ctlMsg is a decoded control message.
type ctlMsg struct {
	kind    byte
	u32     uint32 // ring capacity, peer id or table slot
	live    uint64
	address string // hello, welcome; the reason of a reject
	fds     []int
}

func appendCtl(kind byte) []byte {
	b := make([]byte, 0, 64)
	b = binary.LittleEndian.AppendUint32(b, ctlMagic)
	b = binary.LittleEndian.AppendUint16(b, ctlVersion)
	return append(b, kind, 0)
}

func (m *ctlMsg) encode() []byte {
	b := appendCtl(m.kind)
	switch m.kind {
	case ctlHello, ctlWelcome:
		b = binary.LittleEndian.AppendUint32(b, m.u32)
		b = append(b, m.address...)
	case ctlReject:
		b = append(b, m.address...)
	case ctlRegion, ctlRevoke:
		b = binary.LittleEndian.AppendUint32(b, m.u32)
		b = binary.LittleEndian.AppendUint64(b, m.live)
	}
	return b
}

// decodeCtl parses a control message; fds are the descriptors that came
// with it (owned by the message afterwards, closed on error).
func decodeCtl(b []byte, fds []int) (ctlMsg, error) {
	m := ctlMsg{fds: fds}
	bad := func(f string, a ...any) (ctlMsg, error) {
		closeFDs(fds)
		return ctlMsg{}, fmt.Errorf("%w: "+f, append([]any{ErrProtocol}, a...)...)
	}
	if len(b) < ctlHeader || binary.LittleEndian.Uint32(b) != ctlMagic {
		return bad("control message of %d bytes without magic", len(b))
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != ctlVersion {
		return bad("control version %d, want %d", v, ctlVersion)
	}
	m.kind = b[6]
	body := b[ctlHeader:]
	wantFDs := 0
	switch m.kind {
	case ctlHello, ctlWelcome:
		if len(body) < 4 || len(body) > 4+256 {
			return bad("hello/welcome of %d bytes", len(body))
		}
		m.u32 = binary.LittleEndian.Uint32(body)
		m.address = string(body[4:])
		wantFDs = 2
	case ctlReject:
		m.address = string(body)
	case ctlRegion, ctlRevoke:
		if len(body) != 12 {
			return bad("region message of %d bytes", len(body))
		}
		m.u32 = binary.LittleEndian.Uint32(body)
		m.live = binary.LittleEndian.Uint64(body[4:])
		if m.u32 >= MRSlots || m.live&1 == 0 {
			return bad("region slot %d live %#x", m.u32, m.live)
		}
		if m.kind == ctlRegion {
			wantFDs = 1
		}
	default:
		return bad("control kind %d", m.kind)
	}
	if len(fds) != wantFDs {
		return bad("control kind %d with %d descriptors, want %d", m.kind, len(fds), wantFDs)
	}
	return m, nil
}

// sendCtl writes one control message with its descriptors.
func sendCtl(c *net.UnixConn, m *ctlMsg) error {
	return shmem.SendFDs(c, m.encode(), m.fds...)
}

// recvCtl reads one control message.
func recvCtl(c *net.UnixConn) (ctlMsg, error) {
	var buf [maxCtl]byte
	n, fds, err := shmem.RecvFDs(c, buf[:], 2)
	if err != nil {
		return ctlMsg{}, err
	}
	return decodeCtl(buf[:n], fds)
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			_ = closeFD(fd)
		}
	}
}
