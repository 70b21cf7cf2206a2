package cm

import (
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/verbs"
)

// MRDesc describes a memory region to a peer: everything the peer needs to
// name it in SendWR.RemoteAddr and SendWR.RKey.
type MRDesc struct {
	Addr uint64 // the address of the region's first byte (verbs.MR.Addr)
	Len  uint64 // the region's length in bytes
	RKey uint32 // the region's remote key
}

// DescOf returns the descriptor of mr.
func DescOf(mr verbs.MR) MRDesc {
	return MRDesc{Addr: mr.Addr(), Len: uint64(mr.Len()), RKey: mr.RKey()}
}

// String formats the descriptor as "addr=0x… len=… rkey=0x…".
func (d MRDesc) String() string {
	return fmt.Sprintf("addr=%#x len=%d rkey=%#x", d.Addr, d.Len, d.RKey)
}

// Contains reports whether the n bytes at addr lie inside the region.
func (d MRDesc) Contains(addr, n uint64) bool {
	return addr >= d.Addr && n <= d.Len && addr-d.Addr <= d.Len-n
}

// Encoding of a descriptor list (big-endian): version u8 (1) | count u32 |
// count × (addr u64 | len u64 | rkey u32).
const (
	descVersion   = 1
	descHeaderLen = 5
	descLen       = 20
	// MaxDescs is the largest number of descriptors whose encoding fits
	// in MaxPrivateData.
	MaxDescs = (MaxPrivateData - descHeaderLen) / descLen
)

// EncodeDescs encodes descriptors for Options.PrivateData. Up to MaxDescs
// descriptors fit in the private data of one exchange.
func EncodeDescs(descs []MRDesc) []byte {
	return AppendDescs(make([]byte, 0, descHeaderLen+descLen*len(descs)), descs)
}

// AppendDescs appends the encoding of descs (as EncodeDescs) to b.
func AppendDescs(b []byte, descs []MRDesc) []byte {
	b = append(b, descVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(descs)))
	for _, d := range descs {
		b = binary.BigEndian.AppendUint64(b, d.Addr)
		b = binary.BigEndian.AppendUint64(b, d.Len)
		b = binary.BigEndian.AppendUint32(b, d.RKey)
	}
	return b
}

// DecodeDescs decodes what EncodeDescs produced. b must hold exactly one
// encoding. Errors wrap ErrProtocol: wrong version, a length that does not
// match the count, or a region whose end overflows 64 bits.
func DecodeDescs(b []byte) ([]MRDesc, error) {
	if len(b) < descHeaderLen {
		return nil, protoErr("descriptor list of %d bytes (want at least %d)", len(b), descHeaderLen)
	}
	if b[0] != descVersion {
		return nil, protoErr("descriptor list version %d (want %d)", b[0], descVersion)
	}
	n := binary.BigEndian.Uint32(b[1:5])
	body := b[descHeaderLen:]
	if uint64(n)*descLen != uint64(len(body)) {
		return nil, protoErr("descriptor list: %d descriptors need %d bytes, have %d", n, uint64(n)*descLen, len(body))
	}
	descs := make([]MRDesc, n)
	for i := range descs {
		e := body[i*descLen:]
		d := MRDesc{
			Addr: binary.BigEndian.Uint64(e[0:8]),
			Len:  binary.BigEndian.Uint64(e[8:16]),
			RKey: binary.BigEndian.Uint32(e[16:20]),
		}
		if d.Addr+d.Len < d.Addr {
			return nil, protoErr("descriptor %d: %v overflows the address space", i, d)
		}
		descs[i] = d
	}
	return descs, nil
}
