package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// The wire format is specified in docs/wire.md. Every frame is
//
//	u32 length (bytes after this field) | u8 type | body
//
// little-endian throughout.

// Frame types.
const (
	frameHello   = 1
	frameWelcome = 2
	frameReject  = 3
	frameRequest = 4
	frameResp    = 5
	framePing    = 6
	framePong    = 7
)

const (
	// Magic opens every HELLO: "RDMK" read as a little-endian u32.
	Magic = 0x4b4d4452
	// Version is the protocol version this package speaks.
	Version = 1
	// MaxMessage is the largest SEND, WRITE or READ payload over tcp.
	MaxMessage = 16 << 20
	// maxFrame bounds every frame: the largest payload plus headers.
	maxFrame = MaxMessage + 256
	// maxHandshake bounds HELLO, WELCOME and REJECT frames.
	maxHandshake = 4096

	reqHeader  = 44 // request body after the type byte, before operands
	respHeader = 20 // response body after the type byte, before data
)

// Errors of the wire protocol.
var (
	// ErrProtocol: a frame was malformed or unexpected. The connection is
	// closed; other connections are unaffected.
	ErrProtocol = errors.New("tcp: protocol error")
	// ErrFrameTooLarge: a frame's length exceeds the protocol's bound; it
	// is refused before anything is allocated for it.
	ErrFrameTooLarge = errors.New("tcp: frame too large")
	// ErrRejected: the peer refused the connection (bad token, version).
	ErrRejected = errors.New("tcp: connection rejected")
)

// appendFrameHeader appends a frame header for a body of n bytes
// (including the type byte).
func appendFrameHeader(b []byte, typ byte, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(n+1))
	return append(b, typ)
}

// appendRequest encodes a request frame.
func appendRequest(b []byte, r *nic.Request) []byte {
	n := reqHeader
	atomic := r.Opcode.IsAtomic()
	if atomic {
		n += 8 + 4*8*int(wordsOf(r))
	}
	payload := hasPayload(r.Opcode)
	if payload {
		n += int(r.Length)
	}
	b = appendFrameHeader(b, frameRequest, n)
	var dg byte
	if r.Datagram {
		dg = 1
	}
	b = append(b, byte(r.Opcode), dg)
	b = binary.LittleEndian.AppendUint16(b, uint16(r.Flags))
	b = binary.LittleEndian.AppendUint32(b, r.SrcQPN)
	b = binary.LittleEndian.AppendUint32(b, r.DstQPN)
	b = binary.LittleEndian.AppendUint32(b, r.Epoch)
	b = binary.LittleEndian.AppendUint32(b, r.Seq)
	b = binary.LittleEndian.AppendUint32(b, r.RKey)
	b = binary.LittleEndian.AppendUint64(b, r.RemoteAddr)
	b = binary.LittleEndian.AppendUint32(b, r.Length)
	b = binary.LittleEndian.AppendUint32(b, r.Imm)
	b = binary.LittleEndian.AppendUint32(b, r.QKey)
	if atomic {
		a := &r.Atomic
		b = append(b, a.Size, byte(a.Op), 0, 0, 0, 0, 0, 0)
		w := wordsOf(r)
		for _, arr := range [...]*[4]uint64{&a.Compare, &a.CompareMask, &a.Swap, &a.SwapMask} {
			for i := 0; i < w; i++ {
				b = binary.LittleEndian.AppendUint64(b, arr[i])
			}
		}
	}
	if payload {
		for _, p := range r.Payload {
			b = append(b, p...)
		}
	}
	return b
}

// wordsOf is the number of 8-byte words an atomic's operands take.
func wordsOf(r *nic.Request) int {
	if r.Opcode == verbs.OpMaskedCmpAndSwp || r.Opcode == verbs.OpMaskedFetchAndAdd {
		return int(r.Atomic.Size / 8)
	}
	return 1
}

func hasPayload(op verbs.Opcode) bool {
	return op == verbs.OpWrite || op == verbs.OpWriteWithImm || op == verbs.OpSend || op == verbs.OpSendWithImm
}

// decodeRequest parses a request body (after the type byte). The payload
// slice in r points into body.
func decodeRequest(body []byte, r *nic.Request, pbuf *[1][]byte) error {
	if len(body) < reqHeader {
		return fmt.Errorf("%w: request of %d bytes", ErrProtocol, len(body))
	}
	*r = nic.Request{
		Opcode:     verbs.Opcode(body[0]),
		Datagram:   body[1]&1 != 0,
		Flags:      verbs.SendFlags(binary.LittleEndian.Uint16(body[2:])),
		SrcQPN:     binary.LittleEndian.Uint32(body[4:]),
		DstQPN:     binary.LittleEndian.Uint32(body[8:]),
		Epoch:      binary.LittleEndian.Uint32(body[12:]),
		Seq:        binary.LittleEndian.Uint32(body[16:]),
		RKey:       binary.LittleEndian.Uint32(body[20:]),
		RemoteAddr: binary.LittleEndian.Uint64(body[24:]),
		Length:     binary.LittleEndian.Uint32(body[32:]),
		Imm:        binary.LittleEndian.Uint32(body[36:]),
		QKey:       binary.LittleEndian.Uint32(body[40:]),
	}
	if body[1]&^1 != 0 {
		return fmt.Errorf("%w: reserved request bits %#x", ErrProtocol, body[1])
	}
	if r.Length > MaxMessage {
		return fmt.Errorf("%w: length %d", ErrProtocol, r.Length)
	}
	rest := body[reqHeader:]
	switch {
	case r.Opcode.IsAtomic():
		if len(rest) < 8 {
			return fmt.Errorf("%w: atomic without operands", ErrProtocol)
		}
		a := &r.Atomic
		a.Size, a.Op = rest[0], verbs.CompareOp(rest[1])
		w := wordsOf(r)
		if (r.Opcode == verbs.OpMaskedCmpAndSwp || r.Opcode == verbs.OpMaskedFetchAndAdd) && a.Size != 8 && a.Size != 16 && a.Size != 32 {
			return fmt.Errorf("%w: atomic size %d", ErrProtocol, a.Size)
		}
		rest = rest[8:]
		if len(rest) != 4*8*w {
			return fmt.Errorf("%w: atomic operands of %d bytes", ErrProtocol, len(rest))
		}
		for _, arr := range [...]*[4]uint64{&a.Compare, &a.CompareMask, &a.Swap, &a.SwapMask} {
			for i := 0; i < w; i++ {
				arr[i] = binary.LittleEndian.Uint64(rest)
				rest = rest[8:]
			}
		}
	case hasPayload(r.Opcode):
		if uint32(len(rest)) != r.Length {
			return fmt.Errorf("%w: payload of %d bytes, header says %d", ErrProtocol, len(rest), r.Length)
		}
		pbuf[0] = rest
		r.Payload = pbuf[:]
	case r.Opcode == verbs.OpRead:
		if len(rest) != 0 {
			return fmt.Errorf("%w: READ with a payload", ErrProtocol)
		}
	default:
		return fmt.Errorf("%w: opcode %d", ErrProtocol, body[0])
	}
	return nil
}

// appendResponse encodes a response frame.
func appendResponse(b []byte, r *nic.Response) []byte {
	b = appendFrameHeader(b, frameResp, respHeader+len(r.Data))
	b = append(b, byte(r.Kind), byte(r.Status), 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.SrcQPN)
	b = binary.LittleEndian.AppendUint32(b, r.Epoch)
	b = binary.LittleEndian.AppendUint32(b, r.Seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Data)))
	return append(b, r.Data...)
}

// decodeResponse parses a response body; r.Data points into body.
func decodeResponse(body []byte, r *nic.Response) error {
	if len(body) < respHeader {
		return fmt.Errorf("%w: response of %d bytes", ErrProtocol, len(body))
	}
	*r = nic.Response{
		Kind:   nic.ResponseKind(body[0]),
		Status: verbs.Status(body[1]),
		SrcQPN: binary.LittleEndian.Uint32(body[4:]),
		Epoch:  binary.LittleEndian.Uint32(body[8:]),
		Seq:    binary.LittleEndian.Uint32(body[12:]),
	}
	n := binary.LittleEndian.Uint32(body[16:])
	if r.Kind > nic.RespRNR || r.Status > verbs.StatusGeneralErr || uint32(len(body)-respHeader) != n {
		return fmt.Errorf("%w: response kind %d status %d data %d/%d", ErrProtocol, r.Kind, r.Status, n, len(body)-respHeader)
	}
	r.Data = body[respHeader:]
	return nil
}

// hello is the opening frame of a connection.
type hello struct {
	version uint16
	address string // the dialer's own device address, for replies
	token   string
}

func appendHello(b []byte, h *hello) []byte {
	b = appendFrameHeader(b, frameHello, 4+2+2+2+len(h.address)+2+len(h.token))
	b = binary.LittleEndian.AppendUint32(b, Magic)
	b = binary.LittleEndian.AppendUint16(b, h.version)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = appendString(b, h.address)
	return appendString(b, h.token)
}

func decodeHello(body []byte) (hello, error) {
	var h hello
	if len(body) < 8 || binary.LittleEndian.Uint32(body) != Magic {
		return h, fmt.Errorf("%w: not an rdmakit hello", ErrProtocol)
	}
	h.version = binary.LittleEndian.Uint16(body[4:])
	rest := body[8:]
	var err error
	if h.address, rest, err = readString(rest); err != nil {
		return h, err
	}
	if h.token, rest, err = readString(rest); err != nil {
		return h, err
	}
	if len(rest) != 0 {
		return h, fmt.Errorf("%w: %d trailing bytes in hello", ErrProtocol, len(rest))
	}
	return h, nil
}

// welcome accepts a connection.
type welcome struct {
	version uint16
	peerID  uint32 // how the acceptor knows the dialer (WC.SrcID)
	address string // the acceptor's device address
}

func appendWelcome(b []byte, w *welcome) []byte {
	b = appendFrameHeader(b, frameWelcome, 2+4+2+len(w.address))
	b = binary.LittleEndian.AppendUint16(b, w.version)
	b = binary.LittleEndian.AppendUint32(b, w.peerID)
	return appendString(b, w.address)
}

func decodeWelcome(body []byte) (welcome, error) {
	var w welcome
	if len(body) < 6 {
		return w, fmt.Errorf("%w: short welcome", ErrProtocol)
	}
	w.version = binary.LittleEndian.Uint16(body)
	w.peerID = binary.LittleEndian.Uint32(body[2:])
	var err error
	var rest []byte
	if w.address, rest, err = readString(body[6:]); err != nil {
		return w, err
	}
	if len(rest) != 0 {
		return w, fmt.Errorf("%w: trailing bytes in welcome", ErrProtocol)
	}
	return w, nil
}

// Reject codes.
const (
	rejectVersion = 1
	rejectToken   = 2
	rejectClosed  = 3
)

func appendReject(b []byte, code uint16, reason string) []byte {
	b = appendFrameHeader(b, frameReject, 2+2+len(reason))
	b = binary.LittleEndian.AppendUint16(b, code)
	return appendString(b, reason)
}

func decodeReject(body []byte) (uint16, string, error) {
	if len(body) < 2 {
		return 0, "", fmt.Errorf("%w: short reject", ErrProtocol)
	}
	s, _, err := readString(body[2:])
	return binary.LittleEndian.Uint16(body), s, err
}

func appendPing(b []byte, typ byte, nonce uint64) []byte {
	b = appendFrameHeader(b, typ, 8)
	return binary.LittleEndian.AppendUint64(b, nonce)
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("%w: truncated string", ErrProtocol)
	}
	n := int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, fmt.Errorf("%w: string of %d bytes in %d", ErrProtocol, n, len(b)-2)
	}
	return string(b[2 : 2+n]), b[2+n:], nil
}

// frameReader splits a byte stream into frames without copying them: a
// frame's body stays valid until the next call to next.
type frameReader struct {
	r     io.Reader
	buf   []byte
	start int
	end   int
	max   int
}

func newFrameReader(r io.Reader, size, max int) *frameReader {
	return &frameReader{r: r, buf: make([]byte, size), max: max}
}

// next returns the next frame's type and body (without the type byte).
func (f *frameReader) next() (byte, []byte, error) {
	if err := f.need(4); err != nil {
		return 0, nil, err
	}
	n := int(binary.LittleEndian.Uint32(f.buf[f.start:]))
	if n < 1 || n > f.max {
		return 0, nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, f.max)
	}
	if err := f.need(4 + n); err != nil {
		return 0, nil, err
	}
	body := f.buf[f.start+5 : f.start+4+n]
	typ := f.buf[f.start+4]
	f.start += 4 + n
	return typ, body, nil
}

// pending reports whether a whole frame is already buffered, so reading
// it will not block.
func (f *frameReader) pending() bool {
	if f.end-f.start < 4 {
		return false
	}
	n := int(binary.LittleEndian.Uint32(f.buf[f.start:]))
	return f.end-f.start >= 4+n
}

// need makes sure n bytes from start are buffered, reading as needed.
func (f *frameReader) need(n int) error {
	if f.end-f.start >= n {
		return nil
	}
	if n > len(f.buf) {
		nb := make([]byte, max(n, 2*len(f.buf)))
		f.end = copy(nb, f.buf[f.start:f.end])
		f.buf, f.start = nb, 0
	} else if f.start+n > len(f.buf) {
		f.end = copy(f.buf, f.buf[f.start:f.end])
		f.start = 0
	}
	for f.end-f.start < n {
		k, err := f.r.Read(f.buf[f.end:])
		f.end += k
		if err != nil {
			if f.end-f.start >= n {
				return nil
			}
			if err == io.EOF && f.end > f.start {
				return fmt.Errorf("%w: connection closed mid-frame", ErrProtocol)
			}
			return err
		}
	}
	return nil
}
