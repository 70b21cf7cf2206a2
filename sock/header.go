package sock

import (
	"fmt"
)

// A record in a partition ring is an 8-byte header followed by its payload,
// padded to 8 bytes. The sender writes the payload first and the header
// last, with one aligned 8-byte WRITE, so a receiver that sees a non-zero
// header sees the whole payload (the thesis' rule, with rdmakit's
// single-copy-atomic aligned WRITE in the role of the NTB's 8-byte MOV).
//
// Header bits, least significant first:
//
//	0..23   payload length in bytes (at most a quarter of the ring)
//	24..27  kind: data, fin, rst, pad
//	28      sync: the sender asks for the receiver's read index
//	29..31  reserved, zero
//	32..47  connection slot at the receiver
//	48..62  slot generation
//	63      valid: always set, so a header is never zero
const (
	hdrLenBits  = 24
	hdrMaxLen   = 1<<hdrLenBits - 1
	hdrKindShft = 24
	hdrSyncBit  = 1 << 28
	hdrRsvMask  = 7 << 29
	hdrSlotShft = 32
	hdrGenShft  = 48
	hdrGenMask  = 1<<15 - 1
	hdrValid    = 1 << 63
	hdrSize     = 8
)

// kind is what a record carries.
type kind uint8

const (
	kindData kind = 1 // payload bytes of a connection
	kindFin  kind = 2 // the sender will send no more (Close or CloseWrite)
	kindRst  kind = 3 // the sender dropped the connection
	kindPad  kind = 4 // skip to the end of the ring (length = bytes skipped after the header)
)

func (k kind) String() string {
	switch k {
	case kindData:
		return "data"
	case kindFin:
		return "fin"
	case kindRst:
		return "rst"
	case kindPad:
		return "pad"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// connID names a connection at one end: its slot in that end's table and
// the slot's generation, so records for an earlier occupant are dropped.
type connID struct {
	slot uint16
	gen  uint16 // 15 bits
}

// header is a decoded record header.
type header struct {
	n    int
	kind kind
	sync bool
	id   connID
}

func (h header) encode() uint64 {
	w := uint64(h.n) | uint64(h.kind)<<hdrKindShft | uint64(h.id.slot)<<hdrSlotShft |
		uint64(h.id.gen&hdrGenMask)<<hdrGenShft | hdrValid
	if h.sync {
		w |= hdrSyncBit
	}
	return w
}

// decodeHeader decodes w; it rejects words no honest sender writes. max is
// the largest payload a record may carry.
func decodeHeader(w uint64, max int) (header, error) {
	if w&hdrValid == 0 || w&hdrRsvMask != 0 {
		return header{}, fmt.Errorf("%w: header %#016x: invalid bits", ErrProtocol, w)
	}
	h := header{
		n:    int(w & hdrMaxLen),
		kind: kind(w >> hdrKindShft & 0xf),
		sync: w&hdrSyncBit != 0,
		id:   connID{slot: uint16(w >> hdrSlotShft), gen: uint16(w>>hdrGenShft) & hdrGenMask},
	}
	switch h.kind {
	case kindData:
		if h.n == 0 || h.n > max {
			return header{}, fmt.Errorf("%w: data record of %d bytes (at most %d)", ErrProtocol, h.n, max)
		}
	case kindFin, kindRst, kindPad:
		if h.n != 0 {
			return header{}, fmt.Errorf("%w: %v record with %d bytes", ErrProtocol, h.kind, h.n)
		}
	default:
		return header{}, fmt.Errorf("%w: header %#016x: unknown kind %d", ErrProtocol, w, h.kind)
	}
	return h, nil
}

// recordSize is the ring space a record with n payload bytes takes.
func recordSize(n int) int { return hdrSize + (n+7)&^7 }

// A control-ring entry returns flow-control credit: the receiver's new
// limit on the total bytes (mod 2^32) the sender may have sent on the
// connection. Bits: 0..31 limit, 32..47 slot at the entry's receiver (the
// data sender), 48..62 generation, 63 valid.
func encodeCredit(id connID, limit uint32) uint64 {
	return uint64(limit) | uint64(id.slot)<<32 | uint64(id.gen&hdrGenMask)<<48 | hdrValid
}

func decodeCredit(w uint64) (connID, uint32, bool) {
	if w&hdrValid == 0 {
		return connID{}, 0, false
	}
	return connID{slot: uint16(w >> 32), gen: uint16(w>>48) & hdrGenMask}, uint32(w), true
}
