package cm

import (
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"
)

// Limits of the exchange.
const (
	// MaxPrivateData is the largest private data, in bytes, either side
	// may attach to an exchange.
	MaxPrivateData = 4096
	// MaxAddressLen is the longest device address, in bytes.
	MaxAddressLen = 1024
	// MaxReasonLen is the longest rejection reason, in bytes; longer
	// reasons are truncated.
	MaxReasonLen = 1024
	// maxTransportLen is the longest transport name, in bytes.
	maxTransportLen = 64
	// maxQPN is the largest QP number (24 bits, as in InfiniBand).
	maxQPN = 1<<24 - 1
)

// Wire format (all integers big-endian) — see docs/cm.md:
//
//	header  magic "RDCM" [4] | version u8 | type u8 | reserved u16 (0) | payload length u32
//	REQ/REP qpn u32 | transport len u8 + bytes | address len u16 + bytes | private data len u16 + bytes
//	RTU     (empty)
//	REJ     code u8 | reason len u16 + bytes
const (
	wireMagic   = "RDCM"
	wireVersion = 1
	headerLen   = 12
	// maxPayload is the largest payload of any message.
	maxPayload = 4 + 1 + maxTransportLen + 2 + MaxAddressLen + 2 + MaxPrivateData
)

// msgType is the kind of an exchange message.
type msgType uint8

const (
	msgREQ msgType = 1 // dialer → listener: connection request
	msgREP msgType = 2 // listener → dialer: reply, listener QP is RTS
	msgRTU msgType = 3 // dialer → listener: ready to use, dialer QP is RTS
	msgREJ msgType = 4 // either way: refusal or failure
)

func (t msgType) String() string {
	switch t {
	case msgREQ:
		return "REQ"
	case msgREP:
		return "REP"
	case msgRTU:
		return "RTU"
	case msgREJ:
		return "REJ"
	}
	return fmt.Sprintf("msgType(%d)", uint8(t))
}

// rejectCode says why a REJ was sent.
type rejectCode uint8

const (
	codeRejected    rejectCode = 1 // the application rejected the request
	codeProtocol    rejectCode = 2 // the peer's message was malformed
	codeFailed      rejectCode = 3 // the sender failed to set up its side
	codeUnavailable rejectCode = 4 // the listener is closing or did not accept in time
	maxCode                    = codeUnavailable
)

// message is one exchange message. Which fields are meaningful depends on
// Type.
type message struct {
	Type        msgType
	QPN         uint32 // REQ, REP
	Transport   string // REQ, REP: verbs.DeviceAttr.Transport
	Address     string // REQ, REP: verbs.Device.Address
	PrivateData []byte // REQ, REP
	Code        rejectCode
	Reason      string // REJ
}

// err turns a received REJ into the error the receiver returns.
func (m *message) err() error {
	if m.Code == codeProtocol {
		return fmt.Errorf("%w: peer reports: %s", ErrProtocol, m.Reason)
	}
	return &RejectedError{Reason: m.Reason}
}

// protoErr builds an error wrapping ErrProtocol.
func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// truncateReason cuts s to at most MaxReasonLen bytes on a rune boundary.
func truncateReason(s string) string {
	if len(s) <= MaxReasonLen {
		return s
	}
	s = s[:MaxReasonLen]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// appendMessage appends m's frame to b. It fails, wrapping ErrProtocol,
// when a field exceeds its limit.
func appendMessage(b []byte, m *message) ([]byte, error) {
	var payload int
	switch m.Type {
	case msgREQ, msgREP:
		if m.QPN == 0 || m.QPN > maxQPN {
			return b, protoErr("QPN %d out of range", m.QPN)
		}
		if len(m.Transport) > maxTransportLen {
			return b, protoErr("transport name of %d bytes", len(m.Transport))
		}
		if len(m.Address) > MaxAddressLen {
			return b, protoErr("device address of %d bytes (max %d)", len(m.Address), MaxAddressLen)
		}
		if len(m.PrivateData) > MaxPrivateData {
			return b, fmt.Errorf("%w: %d bytes (max %d)", ErrPrivateDataTooLarge, len(m.PrivateData), MaxPrivateData)
		}
		payload = 4 + 1 + len(m.Transport) + 2 + len(m.Address) + 2 + len(m.PrivateData)
	case msgRTU:
	case msgREJ:
		if m.Code == 0 || m.Code > maxCode {
			return b, protoErr("reject code %d", m.Code)
		}
		if len(m.Reason) > MaxReasonLen {
			return b, protoErr("reason of %d bytes (max %d)", len(m.Reason), MaxReasonLen)
		}
		payload = 1 + 2 + len(m.Reason)
	default:
		return b, protoErr("message type %d", m.Type)
	}
	b = append(b, wireMagic...)
	b = append(b, wireVersion, byte(m.Type), 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(payload))
	switch m.Type {
	case msgREQ, msgREP:
		b = binary.BigEndian.AppendUint32(b, m.QPN)
		b = append(b, byte(len(m.Transport)))
		b = append(b, m.Transport...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Address)))
		b = append(b, m.Address...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.PrivateData)))
		b = append(b, m.PrivateData...)
	case msgREJ:
		b = append(b, byte(m.Code))
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Reason)))
		b = append(b, m.Reason...)
	}
	return b, nil
}

// parseHeader checks a frame header and returns the message type and the
// payload length. Every limit is checked here, before the payload is read
// or allocated.
func parseHeader(h []byte) (msgType, int, error) {
	if string(h[:4]) != wireMagic {
		return 0, 0, protoErr("bad magic %q (not an rdmakit cm peer)", h[:4])
	}
	if h[4] != wireVersion {
		return 0, 0, protoErr("unsupported version %d (want %d)", h[4], wireVersion)
	}
	t := msgType(h[5])
	if h[6] != 0 || h[7] != 0 {
		return 0, 0, protoErr("reserved header bytes %#x %#x", h[6], h[7])
	}
	n := binary.BigEndian.Uint32(h[8:12])
	var lo, hi uint32
	switch t {
	case msgREQ, msgREP:
		lo, hi = 4+1+2+2, maxPayload
	case msgRTU:
		lo, hi = 0, 0
	case msgREJ:
		lo, hi = 1+2, 1+2+MaxReasonLen
	default:
		return 0, 0, protoErr("unknown message type %d", h[5])
	}
	if n < lo || n > hi {
		return 0, 0, protoErr("%v payload of %d bytes (want %d..%d)", t, n, lo, hi)
	}
	return t, int(n), nil
}

// reader walks a payload; the first short read sticks.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() int {
	if v := r.bytes(1); v != nil {
		return int(v[0])
	}
	return 0
}

func (r *reader) u16() int {
	if v := r.bytes(2); v != nil {
		return int(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.bytes(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// parsePayload decodes the payload of a message of type t. The returned
// message owns no memory of p except PrivateData, which is copied.
func parsePayload(t msgType, p []byte) (message, error) {
	m := message{Type: t}
	r := reader{b: p}
	switch t {
	case msgREQ, msgREP:
		m.QPN = r.u32()
		tl := r.u8()
		if tl > maxTransportLen {
			return message{}, protoErr("transport name of %d bytes", tl)
		}
		m.Transport = string(r.bytes(tl))
		al := r.u16()
		if al > MaxAddressLen {
			return message{}, protoErr("device address of %d bytes (max %d)", al, MaxAddressLen)
		}
		m.Address = string(r.bytes(al))
		pl := r.u16()
		if pl > MaxPrivateData {
			return message{}, protoErr("private data of %d bytes (max %d)", pl, MaxPrivateData)
		}
		if pd := r.bytes(pl); len(pd) > 0 {
			m.PrivateData = append([]byte(nil), pd...)
		}
		if !r.bad && (m.QPN == 0 || m.QPN > maxQPN) {
			return message{}, protoErr("QPN %d out of range", m.QPN)
		}
	case msgRTU:
	case msgREJ:
		m.Code = rejectCode(r.u8())
		rl := r.u16()
		if rl > MaxReasonLen {
			return message{}, protoErr("reason of %d bytes (max %d)", rl, MaxReasonLen)
		}
		m.Reason = string(r.bytes(rl))
		if !r.bad && (m.Code == 0 || m.Code > maxCode) {
			return message{}, protoErr("reject code %d", m.Code)
		}
	}
	if r.bad {
		return message{}, protoErr("%v payload truncated", t)
	}
	if len(r.b) != 0 {
		return message{}, protoErr("%v payload has %d trailing bytes", t, len(r.b))
	}
	return m, nil
}

// decodeMessage decodes the frame at the start of b and returns the
// message and the frame's length. Errors wrap ErrProtocol; a frame cut
// short also wraps io.ErrUnexpectedEOF.
func decodeMessage(b []byte) (message, int, error) {
	if len(b) < headerLen {
		return message{}, 0, fmt.Errorf("%w: frame of %d bytes: %w", ErrProtocol, len(b), io.ErrUnexpectedEOF)
	}
	t, n, err := parseHeader(b[:headerLen])
	if err != nil {
		return message{}, 0, err
	}
	if len(b)-headerLen < n {
		return message{}, 0, fmt.Errorf("%w: %v payload %d of %d bytes: %w", ErrProtocol, t, len(b)-headerLen, n, io.ErrUnexpectedEOF)
	}
	m, err := parsePayload(t, b[headerLen:headerLen+n])
	if err != nil {
		return message{}, 0, err
	}
	return m, headerLen + n, nil
}

// readMessage reads one frame from r. A malformed frame gives an error
// wrapping ErrProtocol; I/O errors (EOF, deadlines) are returned wrapped
// as they are.
func readMessage(r io.Reader) (message, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return message{}, fmt.Errorf("read header: %w", err)
	}
	t, n, err := parseHeader(h[:])
	if err != nil {
		return message{}, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return message{}, fmt.Errorf("read %v payload: %w", t, err)
	}
	return parsePayload(t, p)
}

// writeMessage writes m as one frame with one Write call.
func writeMessage(w io.Writer, m *message) error {
	b, err := appendMessage(make([]byte, 0, 64+len(m.Address)+len(m.PrivateData)+len(m.Reason)), m)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write %v: %w", m.Type, err)
	}
	return nil
}
