package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

const (
	// RequestHeader is the size of a request before its operands.
	RequestHeader = 44
	// ResponseHeader is the size of a response before its data.
	ResponseHeader = 20
)

// ErrMalformed is matched by every decoding error.
var ErrMalformed = errors.New("wire: malformed message")

// ErrReserved is matched, with ErrMalformed, by the error for a message
// with a reserved bit or byte set: reserved fields are checked so that
// they can be given meaning later (docs/wire.md).
var ErrReserved = errors.New("wire: reserved field not zero")

// wireFlags are the send flags a request may carry: ibverbs' four and
// PRISM's five (docs/wire.md); the other bits are reserved.
const wireFlags = verbs.FlagSignaled | verbs.FlagInline | verbs.FlagFence | verbs.FlagSolicited |
	verbs.FlagIndirect | verbs.FlagIndirectArg | verbs.FlagBounded | verbs.FlagConditional | verbs.FlagRedirect

// extLen is the size of the PRISM operand addresses (ArgAddr,
// RedirectAddr) that follow the header of a request that needs them.
const extLen = 16

// hasExt reports whether r carries the PRISM operand addresses.
func hasExt(r *nic.Request) bool {
	return r.Flags&(verbs.FlagIndirectArg|verbs.FlagRedirect) != 0
}

// carriesPayload reports whether r's Length bytes travel with it.
func carriesPayload(r *nic.Request) bool {
	return HasPayload(r.Opcode) && r.Flags&verbs.FlagIndirectArg == 0
}

// RequestLen is the encoded size of r.
func RequestLen(r *nic.Request) int {
	n := RequestHeader
	if hasExt(r) {
		n += extLen
	}
	if r.Opcode.IsAtomic() {
		n += 8 + 4*8*wordsOf(r)
	}
	if carriesPayload(r) {
		n += int(r.Length)
	}
	return n
}

// AppendRequest appends the encoding of r (RequestLen(r) bytes) to b. The
// payload buffers must hold r.Length bytes together.
func AppendRequest(b []byte, r *nic.Request) []byte {
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
	if hasExt(r) {
		b = binary.LittleEndian.AppendUint64(b, r.ArgAddr)
		b = binary.LittleEndian.AppendUint64(b, r.RedirectAddr)
	}
	if r.Opcode.IsAtomic() {
		a := &r.Atomic
		b = append(b, a.Size, byte(a.Op), 0, 0, 0, 0, 0, 0)
		w := wordsOf(r)
		for _, arr := range [...]*[4]uint64{&a.Compare, &a.CompareMask, &a.Swap, &a.SwapMask} {
			for i := 0; i < w; i++ {
				b = binary.LittleEndian.AppendUint64(b, arr[i])
			}
		}
	}
	if carriesPayload(r) {
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

// HasPayload reports whether requests of op carry bytes.
func HasPayload(op verbs.Opcode) bool {
	return op == verbs.OpWrite || op == verbs.OpWriteWithImm || op == verbs.OpSend || op == verbs.OpSendWithImm || op == verbs.OpAllocate
}

// DecodeRequest parses a request of at most maxLen payload bytes. The
// payload slice in r is pbuf[:], pointing into body.
func DecodeRequest(body []byte, r *nic.Request, pbuf *[1][]byte, maxLen uint32) error {
	if len(body) < RequestHeader {
		return fmt.Errorf("%w: request of %d bytes", ErrMalformed, len(body))
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
		return fmt.Errorf("%w: %w: request bits %#x", ErrMalformed, ErrReserved, body[1])
	}
	if r.Flags&^wireFlags != 0 {
		return fmt.Errorf("%w: %w: send flags %#x", ErrMalformed, ErrReserved, uint16(r.Flags&^wireFlags))
	}
	if r.Length > maxLen {
		return fmt.Errorf("%w: length %d", ErrMalformed, r.Length)
	}
	rest := body[RequestHeader:]
	if hasExt(r) {
		if len(rest) < extLen {
			return fmt.Errorf("%w: PRISM operand addresses missing", ErrMalformed)
		}
		r.ArgAddr = binary.LittleEndian.Uint64(rest)
		r.RedirectAddr = binary.LittleEndian.Uint64(rest[8:])
		rest = rest[extLen:]
	}
	switch {
	case r.Opcode.IsAtomic():
		if len(rest) < 8 {
			return fmt.Errorf("%w: atomic without operands", ErrMalformed)
		}
		a := &r.Atomic
		a.Size, a.Op = rest[0], verbs.CompareOp(rest[1])
		if binary.LittleEndian.Uint64(rest)>>16 != 0 {
			return fmt.Errorf("%w: %w: atomic operand header %x", ErrMalformed, ErrReserved, rest[:8])
		}
		w := wordsOf(r)
		if (r.Opcode == verbs.OpMaskedCmpAndSwp || r.Opcode == verbs.OpMaskedFetchAndAdd) && a.Size != 8 && a.Size != 16 && a.Size != 32 {
			return fmt.Errorf("%w: atomic size %d", ErrMalformed, a.Size)
		}
		rest = rest[8:]
		if len(rest) != 4*8*w {
			return fmt.Errorf("%w: atomic operands of %d bytes", ErrMalformed, len(rest))
		}
		for _, arr := range [...]*[4]uint64{&a.Compare, &a.CompareMask, &a.Swap, &a.SwapMask} {
			for i := 0; i < w; i++ {
				arr[i] = binary.LittleEndian.Uint64(rest)
				rest = rest[8:]
			}
		}
	case HasPayload(r.Opcode) && !carriesPayload(r):
		if len(rest) != 0 {
			return fmt.Errorf("%w: INDIRECT_ARG %v with a payload", ErrMalformed, r.Opcode)
		}
	case HasPayload(r.Opcode):
		if uint32(len(rest)) != r.Length {
			return fmt.Errorf("%w: payload of %d bytes, header says %d", ErrMalformed, len(rest), r.Length)
		}
		pbuf[0] = rest
		r.Payload = pbuf[:]
	case r.Opcode == verbs.OpRead:
		if len(rest) != 0 {
			return fmt.Errorf("%w: READ with a payload", ErrMalformed)
		}
	default:
		return fmt.Errorf("%w: opcode %d", ErrMalformed, body[0])
	}
	return nil
}

// ResponseLen is the encoded size of r.
func ResponseLen(r *nic.Response) int { return ResponseHeader + len(r.Data) }

// AppendResponse appends the encoding of r to b.
func AppendResponse(b []byte, r *nic.Response) []byte {
	b = append(b, byte(r.Kind), byte(r.Status), 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.SrcQPN)
	b = binary.LittleEndian.AppendUint32(b, r.Epoch)
	b = binary.LittleEndian.AppendUint32(b, r.Seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Data)))
	return append(b, r.Data...)
}

// DecodeResponse parses a response; r.Data points into body.
func DecodeResponse(body []byte, r *nic.Response) error {
	if len(body) < ResponseHeader {
		return fmt.Errorf("%w: response of %d bytes", ErrMalformed, len(body))
	}
	*r = nic.Response{
		Kind:   nic.ResponseKind(body[0]),
		Status: verbs.Status(body[1]),
		SrcQPN: binary.LittleEndian.Uint32(body[4:]),
		Epoch:  binary.LittleEndian.Uint32(body[8:]),
		Seq:    binary.LittleEndian.Uint32(body[12:]),
	}
	n := binary.LittleEndian.Uint32(body[16:])
	if body[2] != 0 || body[3] != 0 {
		return fmt.Errorf("%w: %w: response bytes %x", ErrMalformed, ErrReserved, body[2:4])
	}
	if r.Kind > nic.RespDrop || !r.Status.Valid() || uint32(len(body)-ResponseHeader) != n {
		return fmt.Errorf("%w: response kind %d status %d data %d/%d", ErrMalformed, r.Kind, r.Status, n, len(body)-ResponseHeader)
	}
	r.Data = body[ResponseHeader:]
	return nil
}
