package rpctree

import (
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/btree"
)

// Name is the service clients ask for in memnode.Hello.Service.
const Name = "btree-rpc"

// Methods of the service.
const (
	MethodGet uint16 = 1 + iota
	MethodPut
	MethodDelete
	MethodScan
)

// MaxMessage is the rpc message size of servers and clients: room for a
// largest pair and a scan page of many small ones.
const MaxMessage = 16 << 10

// entrySize is the bytes of one scanned pair on the wire.
func entrySize(k, v []byte) int { return 3 + len(k) + len(v) }

// appendEntry appends one scanned pair.
func appendEntry(b, k, v []byte) []byte {
	b = append(b, byte(len(k)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, k...)
	return append(b, v...)
}

// errProtocol is a malformed message.
var errProtocol = fmt.Errorf("%w: rpctree: malformed message", btree.ErrUnreachable)

// nextEntry decodes the first pair of b and returns the rest.
func nextEntry(b []byte) (k, v, rest []byte, err error) {
	if len(b) < 3 {
		return nil, nil, nil, errProtocol
	}
	kl, vl := int(b[0]), int(binary.LittleEndian.Uint16(b[1:3]))
	if len(b) < 3+kl+vl {
		return nil, nil, nil, errProtocol
	}
	return b[3 : 3+kl], b[3+kl : 3+kl+vl], b[3+kl+vl:], nil
}

// scanReq encodes a Scan request.
func scanReq(from, to []byte, limit int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(max(limit, 0)))
	b = append(b, byte(len(from)))
	b = append(b, from...)
	if to == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	return append(b, to...)
}

// parseScanReq decodes a Scan request; to is nil when unbounded.
func parseScanReq(b []byte) (from, to []byte, limit int, err error) {
	if len(b) < 6 {
		return nil, nil, 0, errProtocol
	}
	limit = int(binary.LittleEndian.Uint32(b))
	fl := int(b[4])
	if len(b) < 6+fl {
		return nil, nil, 0, errProtocol
	}
	from = b[5 : 5+fl]
	if b[5+fl] != 0 {
		to = b[6+fl:]
		if to == nil {
			to = []byte{}
		}
	}
	return from, to, limit, nil
}
