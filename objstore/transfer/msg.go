package transfer

import (
	"encoding/binary"
	"fmt"

	"github.com/rdmakit/rdmakit/objstore/object"
)

// Control messages and payload chunks travel as SENDs into the peer's
// receive slots. Every message starts with an 8-byte header (little
// endian):
//
//	type u8 | version u8 (1) | credits u16 | transfer id u32
//
// credits returns that many receive slots the sender has re-posted since
// its last message (the piggy-backed credit return). The body depends on
// the type:
//
//	TRANSFER   id [20] | mode u8 | 0 [3] | threshold u64         fetcher → holder
//	DATA       dataSize u64 | metaSize u64 | protocol u8         holder → fetcher
//	NOT_FOUND  (none)                                            holder → fetcher
//	CHUNK      offset u64 | payload (the rest of the message)    holder → fetcher
//	READ_INFO  addr u64 | rkey u32 | len u64                     holder → fetcher
//	FIN        status u8 (0 done, 1 aborted)                     fetcher → holder
//	ACK        (none; transfer id 0)                             either way
//
// decode checks every length exactly (a CHUNK's at least), the version,
// the type and the values' ranges before anything is used.
const (
	msgTransfer uint8 = 1 + iota
	msgData
	msgNotFound
	msgChunk
	msgReadInfo
	msgFin
	msgAck
)

const (
	wireVersion  = 1
	headerLen    = 8
	transferLen  = headerLen + object.IDSize + 4 + 8
	dataLen      = headerLen + 8 + 8 + 1
	chunkHdrLen  = headerLen + 8
	readInfoLen  = headerLen + 8 + 4 + 8
	finLen       = headerLen + 1
	maxCtlLen    = transferLen // the longest control message
	maxObjectLen = 1 << 40     // a DATA announcing more is refused
)

// FIN statuses.
const (
	finDone    = 0
	finAborted = 1
)

var msgNames = [...]string{"?", "TRANSFER", "DATA", "NOT_FOUND", "CHUNK", "READ_INFO", "FIN", "ACK"}

func msgName(t uint8) string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("type %d", t)
}

// msg is a decoded message; payload aliases the receive slot.
type msg struct {
	typ     uint8
	credits uint16
	tid     uint32

	id        object.ID // TRANSFER
	mode      Protocol  // TRANSFER
	threshold uint64    // TRANSFER

	dataSize, metaSize uint64   // DATA
	proto              Protocol // DATA

	off     uint64 // CHUNK
	payload []byte // CHUNK

	addr   uint64 // READ_INFO
	rkey   uint32 // READ_INFO
	length uint64 // READ_INFO

	status uint8 // FIN
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{object.ErrProtocol}, args...)...)
}

// decode parses one received message. Errors wrap object.ErrProtocol.
func decode(b []byte) (msg, error) {
	var m msg
	if len(b) < headerLen {
		return m, protoErr("message of %d bytes, shorter than a header", len(b))
	}
	if b[1] != wireVersion {
		return m, protoErr("message version %d (want %d)", b[1], wireVersion)
	}
	m.typ = b[0]
	m.credits = binary.LittleEndian.Uint16(b[2:4])
	m.tid = binary.LittleEndian.Uint32(b[4:8])
	want := 0
	switch m.typ {
	case msgTransfer:
		want = transferLen
	case msgData:
		want = dataLen
	case msgNotFound, msgAck:
		want = headerLen
	case msgChunk:
		if len(b) < chunkHdrLen {
			return m, protoErr("CHUNK of %d bytes (want at least %d)", len(b), chunkHdrLen)
		}
		want = len(b)
	case msgReadInfo:
		want = readInfoLen
	case msgFin:
		want = finLen
	default:
		return m, protoErr("unknown message type %d", m.typ)
	}
	if len(b) != want {
		return m, protoErr("%s of %d bytes (want %d)", msgName(m.typ), len(b), want)
	}
	body := b[headerLen:]
	switch m.typ {
	case msgTransfer:
		copy(m.id[:], body[:object.IDSize])
		m.mode = Protocol(body[object.IDSize])
		if !m.mode.Verbs() {
			return m, protoErr("TRANSFER in mode %v", m.mode)
		}
		m.threshold = binary.LittleEndian.Uint64(body[object.IDSize+4:])
	case msgData:
		m.dataSize = binary.LittleEndian.Uint64(body[0:8])
		m.metaSize = binary.LittleEndian.Uint64(body[8:16])
		m.proto = Protocol(body[16])
		if m.proto != SendRecv && m.proto != Read {
			return m, protoErr("DATA with protocol %v", m.proto)
		}
		if m.dataSize > maxObjectLen || m.metaSize > maxObjectLen-m.dataSize {
			return m, protoErr("DATA of %d+%d bytes (max %d)", m.dataSize, m.metaSize, uint64(maxObjectLen))
		}
	case msgChunk:
		m.off = binary.LittleEndian.Uint64(body[0:8])
		m.payload = body[8:]
	case msgReadInfo:
		m.addr = binary.LittleEndian.Uint64(body[0:8])
		m.rkey = binary.LittleEndian.Uint32(body[8:12])
		m.length = binary.LittleEndian.Uint64(body[12:20])
		if m.addr+m.length < m.addr {
			return m, protoErr("READ_INFO addr %#x len %d overflows", m.addr, m.length)
		}
	case msgFin:
		m.status = body[0]
		if m.status != finDone && m.status != finAborted {
			return m, protoErr("FIN status %d", m.status)
		}
	}
	if m.tid == 0 && m.typ != msgAck {
		return m, protoErr("%s with transfer id 0", msgName(m.typ))
	}
	return m, nil
}

// putHeader writes a header with no credits; the pair fills them in when
// it posts the message.
func putHeader(b []byte, typ uint8, tid uint32) {
	b[0] = typ
	b[1] = wireVersion
	binary.LittleEndian.PutUint16(b[2:4], 0)
	binary.LittleEndian.PutUint32(b[4:8], tid)
}

func encodeTransfer(b []byte, tid uint32, id object.ID, mode Protocol, threshold uint64) int {
	putHeader(b, msgTransfer, tid)
	copy(b[headerLen:], id[:])
	b[headerLen+object.IDSize] = byte(mode)
	clear(b[headerLen+object.IDSize+1 : headerLen+object.IDSize+4])
	binary.LittleEndian.PutUint64(b[headerLen+object.IDSize+4:], threshold)
	return transferLen
}

func encodeData(b []byte, tid uint32, dataSize, metaSize uint64, proto Protocol) int {
	putHeader(b, msgData, tid)
	binary.LittleEndian.PutUint64(b[8:], dataSize)
	binary.LittleEndian.PutUint64(b[16:], metaSize)
	b[24] = byte(proto)
	return dataLen
}

func encodeNotFound(b []byte, tid uint32) int {
	putHeader(b, msgNotFound, tid)
	return headerLen
}

// encodeChunkHeader writes a CHUNK's header; the payload follows at
// b[chunkHdrLen:].
func encodeChunkHeader(b []byte, tid uint32, off uint64) {
	putHeader(b, msgChunk, tid)
	binary.LittleEndian.PutUint64(b[8:], off)
}

func encodeReadInfo(b []byte, tid uint32, addr uint64, rkey uint32, length uint64) int {
	putHeader(b, msgReadInfo, tid)
	binary.LittleEndian.PutUint64(b[8:], addr)
	binary.LittleEndian.PutUint32(b[16:], rkey)
	binary.LittleEndian.PutUint64(b[20:], length)
	return readInfoLen
}

func encodeFin(b []byte, tid uint32, status uint8) int {
	putHeader(b, msgFin, tid)
	b[8] = status
	return finLen
}

func encodeAck(b []byte) int {
	putHeader(b, msgAck, 0)
	return headerLen
}
