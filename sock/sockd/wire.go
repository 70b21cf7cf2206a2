package sockd

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The wire protocol between Clients and a Server, and between a dialer and
// a remote Server's TCP port. Every message is one frame:
//
//	u32 length   of what follows, big-endian (at most maxFrame; a status
//	             reply at most maxStatusFrame)
//	u8  version  wireVersion
//	u8  type     msgRegister …
//	u32 id       the request's id, echoed by its reply (0 for RELEASE)
//	…   payload  the type's fields in order: a string is u8 length + bytes,
//	             an integer a big-endian u32 (i32 for a partition)
//
// A frame of another version is answered by an ERROR with code
// codeVersion and the connection closed; so is a malformed one (codeBad).

// wireVersion is the protocol version every frame carries.
const wireVersion = 1

// Message types.
const (
	msgRegister = 1 // uri, app, pid, partitions, ring, mtu → OK | ERROR
	msgAdmit    = 2 // peer app, partitions → ADMITTED | ERROR
	msgRelease  = 3 // peer app, partition, count (no reply)
	msgResolve  = 4 // network, address → RESOLVED | ERROR
	msgStatus   = 5 // → STATUSREPLY

	msgOK          = 64
	msgAdmitted    = 65 // partition
	msgResolved    = 66 // ok (u8), uri
	msgStatusReply = 67 // the Status as JSON: the rest of the frame
	msgError       = 68 // code (u8), reason
)

// Error codes of an ERROR reply.
const (
	codeBad           = 1 // malformed or unexpected request
	codeVersion       = 2 // another protocol version
	codeDenied        = 3 // the allow-list said no
	codeQuota         = 4 // a quota is used up
	codeFull          = 5 // a table of the daemon is full
	codeNotRegistered = 6 // ADMIT on a connection that registered nothing
	codeConflict      = 7 // REGISTER of an address already registered
)

const (
	headerLen      = 1 + 1 + 4
	maxFrame       = 4 << 10 // every frame but a status reply
	maxStatusFrame = 4 << 20
	maxString      = 255
)

// msg is any message, decoded: the fields its type uses are set.
type msg struct {
	typ   uint8
	id    uint32
	uri   string // REGISTER, RESOLVED
	app   string // REGISTER (the listener's), ADMIT and RELEASE (the dialer's)
	pid   uint32
	parts uint32 // REGISTER, ADMIT: partitions
	ring  uint32
	mtu   uint32
	part  int32  // ADMITTED, RELEASE
	count uint32 // RELEASE
	net   string // RESOLVE
	addr  string // RESOLVE
	ok    bool   // RESOLVED
	code  uint8  // ERROR
	text  string // ERROR: reason
	body  []byte // STATUSREPLY
}

// encode appends m's frame to b.
func (m *msg) encode(b []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, wireVersion, m.typ)
	b = binary.BigEndian.AppendUint32(b, m.id)
	u32 := func(v uint32) { b = binary.BigEndian.AppendUint32(b, v) }
	str := func(s string) {
		if len(s) > maxString {
			s = s[:maxString]
		}
		b = append(b, uint8(len(s)))
		b = append(b, s...)
	}
	switch m.typ {
	case msgRegister:
		str(m.uri)
		str(m.app)
		u32(m.pid)
		u32(m.parts)
		u32(m.ring)
		u32(m.mtu)
	case msgAdmit:
		str(m.app)
		u32(m.parts)
	case msgRelease:
		str(m.app)
		u32(uint32(m.part))
		u32(m.count)
	case msgResolve:
		str(m.net)
		str(m.addr)
	case msgAdmitted:
		u32(uint32(m.part))
	case msgResolved:
		ok := uint8(0)
		if m.ok {
			ok = 1
		}
		b = append(b, ok)
		str(m.uri)
	case msgStatusReply:
		b = append(b, m.body...)
	case msgError:
		b = append(b, m.code)
		str(m.text)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// decodeError is a malformed frame.
type decodeError struct{ why string }

func (e *decodeError) Error() string        { return "sockd: malformed message: " + e.why }
func (e *decodeError) Is(target error) bool { return target == ErrProtocol }

// decoder reads a frame's fields, remembering the first shortage.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.bad = true
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) str() string {
	n := int(d.u8())
	if len(d.b) < n {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decode parses a frame's body (what follows the length word).
func decode(frame []byte) (msg, error) {
	var m msg
	if len(frame) < headerLen {
		return m, &decodeError{"short header"}
	}
	if frame[0] != wireVersion {
		return m, fmt.Errorf("sockd: protocol version %d, this is %d: %w", frame[0], wireVersion, ErrVersion)
	}
	m.typ = frame[1]
	m.id = binary.BigEndian.Uint32(frame[2:])
	d := decoder{b: frame[headerLen:]}
	switch m.typ {
	case msgRegister:
		m.uri, m.app = d.str(), d.str()
		m.pid, m.parts, m.ring, m.mtu = d.u32(), d.u32(), d.u32(), d.u32()
	case msgAdmit:
		m.app, m.parts = d.str(), d.u32()
	case msgRelease:
		m.app, m.part, m.count = d.str(), int32(d.u32()), d.u32()
	case msgResolve:
		m.net, m.addr = d.str(), d.str()
	case msgStatus, msgOK:
	case msgAdmitted:
		m.part = int32(d.u32())
	case msgResolved:
		m.ok = d.u8() == 1
		m.uri = d.str()
	case msgStatusReply:
		m.body, d.b = d.b, nil
	case msgError:
		m.code, m.text = d.u8(), d.str()
	default:
		return m, &decodeError{fmt.Sprintf("type %d", m.typ)}
	}
	if d.bad {
		return m, &decodeError{fmt.Sprintf("type %d: short", m.typ)}
	}
	if len(d.b) != 0 {
		return m, &decodeError{fmt.Sprintf("type %d: %d trailing bytes", m.typ, len(d.b))}
	}
	return m, nil
}

// readFrame reads one frame of at most limit bytes into buf (grown when
// too small) and returns its body.
func readFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > limit {
		return nil, &decodeError{fmt.Sprintf("frame of %d bytes (at most %d)", n, limit)}
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// readMsg reads and decodes one frame.
func readMsg(r io.Reader, buf []byte, limit int) (msg, error) {
	frame, err := readFrame(r, buf, limit)
	if err != nil {
		return msg{}, err
	}
	return decode(frame)
}
