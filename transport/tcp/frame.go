package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/internal/wire"
	"github.com/rdmakit/rdmakit/nic"
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
	// Version is the protocol version this package speaks: 2 added
	// PRISM's flags, operand addresses and WR_SKIPPED (docs/wire.md).
	Version = 2
	// MaxMessage is the largest SEND, WRITE or READ payload over tcp.
	MaxMessage = 16 << 20
	// maxFrame bounds every frame: the largest payload plus headers.
	maxFrame = MaxMessage + 256
	// maxHandshake bounds HELLO, WELCOME and REJECT frames.
	maxHandshake = 4096

	reqHeader = wire.RequestHeader // request body after the type byte, before operands
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
	b = appendFrameHeader(b, frameRequest, wire.RequestLen(r))
	return wire.AppendRequest(b, r)
}

// decodeRequest parses a request body (after the type byte). The payload
// slice in r points into body.
func decodeRequest(body []byte, r *nic.Request, pbuf *[1][]byte) error {
	if err := wire.DecodeRequest(body, r, pbuf, MaxMessage); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return nil
}

// appendResponse encodes a response frame.
func appendResponse(b []byte, r *nic.Response) []byte {
	b = appendFrameHeader(b, frameResp, wire.ResponseLen(r))
	return wire.AppendResponse(b, r)
}

// decodeResponse parses a response body; r.Data points into body.
func decodeResponse(body []byte, r *nic.Response) error {
	if err := wire.DecodeResponse(body, r); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
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
	rejectBusy    = 4 // the listener serves maxconns connections already
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
