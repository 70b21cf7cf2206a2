package ford

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"

	"github.com/rdmakit/rdmakit/txn"
)

// A log record, at offset 0 of its coordinator's log area (little-endian):
//
//	[0:8)    magic logMagic; 0 once truncated
//	[8:16)   the transaction's lock word: its identity
//	[16:20)  u32 number of entries
//	[20:24)  u32 body length
//	[24:32)  CRC64 of [0:24) ‖ body
//	body     entries: u16 shard | u8 flags (bit 0 present) | u8 key length | u32 slot |
//	         u64 new version | u32 value length | u32 0 | key | value
//
// It holds what recovery needs to roll the transaction forward: every
// written record's place (its copies follow from the shard) and new
// image. The old images are not logged: a complete record is never
// rolled back (doc.go), and a transaction without one wrote nothing in
// place. A torn or corrupt record fails its CRC and counts as no record.
const (
	logMagic  = 0x31474f4c44524f46 // "FORDLOG1"
	logHead   = 32
	entryHead = 24
)

// errBadLog: a log area that holds no valid record.
var errBadLog = errors.New("ford: no valid log record")

// logEntry is one written record of a log record.
type logEntry struct {
	shard   int
	slot    int
	version uint64 // the version the commit installs
	present bool
	key     []byte
	value   []byte
}

// logRecord is a decoded log record.
type logRecord struct {
	lock    lockWord
	entries []logEntry
}

// entryLen is the bytes of e in a record.
func entryLen(e *logEntry) int { return entryHead + len(e.key) + len(e.value) }

// recordLen is the bytes of a record of entries es.
func recordLen(es []logEntry) int {
	n := logHead
	for i := range es {
		n += entryLen(&es[i])
	}
	return n
}

// encodeLog writes the record of lock and es into b (recordLen bytes)
// and returns its length.
func encodeLog(b []byte, lock lockWord, es []logEntry) int {
	p := logHead
	for i := range es {
		e := &es[i]
		binary.LittleEndian.PutUint16(b[p:], uint16(e.shard))
		b[p+2] = 0
		if e.present {
			b[p+2] = flagPresent
		}
		b[p+3] = byte(len(e.key))
		binary.LittleEndian.PutUint32(b[p+4:], uint32(e.slot))
		binary.LittleEndian.PutUint64(b[p+8:], e.version)
		binary.LittleEndian.PutUint32(b[p+16:], uint32(len(e.value)))
		binary.LittleEndian.PutUint32(b[p+20:], 0)
		p += entryHead
		p += copy(b[p:], e.key)
		p += copy(b[p:], e.value)
	}
	binary.LittleEndian.PutUint64(b[0:], logMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(lock))
	binary.LittleEndian.PutUint32(b[16:], uint32(len(es)))
	binary.LittleEndian.PutUint32(b[20:], uint32(p-logHead))
	binary.LittleEndian.PutUint64(b[24:], logCRC(b[:24], b[logHead:p]))
	return p
}

func logCRC(head, body []byte) uint64 {
	return crc64.Update(crc64.Checksum(head, crcTable), crcTable, body)
}

// decodeLog decodes the log area b of a database of layout l on nodes
// nodes. Anything that is not a whole, valid record — truncated, torn,
// corrupt, out of the layout's bounds — is errBadLog: not logged. The
// entries alias b.
func decodeLog(b []byte, l *Layout, nodes int) (logRecord, error) {
	var r logRecord
	if len(b) < logHead || binary.LittleEndian.Uint64(b) != logMagic {
		return r, errBadLog
	}
	n, size := int(binary.LittleEndian.Uint32(b[16:])), int(binary.LittleEndian.Uint32(b[20:]))
	if size > len(b)-logHead || n > size/entryHead {
		return r, fmt.Errorf("%w: %d entries in %d bytes", errBadLog, n, size)
	}
	body := b[logHead : logHead+size]
	if binary.LittleEndian.Uint64(b[24:]) != logCRC(b[:24], body) {
		return r, fmt.Errorf("%w: checksum", errBadLog)
	}
	r.lock = lockWord(binary.LittleEndian.Uint64(b[8:]))
	if uint64(r.lock)&lockBit == 0 {
		return r, fmt.Errorf("%w: lock word %#x", errBadLog, uint64(r.lock))
	}
	r.entries = make([]logEntry, 0, n)
	p := 0
	for range n {
		if len(body)-p < entryHead {
			return r, fmt.Errorf("%w: short entry", errBadLog)
		}
		h := body[p : p+entryHead]
		e := logEntry{shard: int(binary.LittleEndian.Uint16(h)), present: h[2]&flagPresent != 0,
			slot: int(binary.LittleEndian.Uint32(h[4:])), version: binary.LittleEndian.Uint64(h[8:])}
		klen, vlen := int(h[3]), int(binary.LittleEndian.Uint32(h[16:]))
		switch {
		case e.shard >= nodes || e.slot >= l.Buckets:
			return r, fmt.Errorf("%w: slot %d of shard %d", errBadLog, e.slot, e.shard)
		case klen == 0 || klen > txn.MaxKey || vlen > l.ValueSize || !e.present && vlen > 0:
			return r, fmt.Errorf("%w: a %d-byte key, %d-byte value", errBadLog, klen, vlen)
		case len(body)-p-entryHead < klen+vlen:
			return r, fmt.Errorf("%w: short entry", errBadLog)
		}
		p += entryHead
		e.key, e.value = body[p:p+klen], body[p+klen:p+klen+vlen]
		p += klen + vlen
		r.entries = append(r.entries, e)
	}
	if p != len(body) {
		return r, fmt.Errorf("%w: %d bytes after the entries", errBadLog, len(body)-p)
	}
	return r, nil
}
