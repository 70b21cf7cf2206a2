package farm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/txn"
)

// ErrProtocol: a message or log record that does not decode.
var ErrProtocol = errors.New("farm: protocol error")

// Kinds of log records (ring.go carries them).
const (
	recAbort         = 1 // primary: release the transaction's locks
	recCommitPrimary = 2 // primary: install the locked writes, unlock
	recCommitBackup  = 3 // backup: keep the writes until truncated
	recTruncate      = 4 // only truncations
)

// A record body, little-endian:
//
//	u8 kind | u8 shard | u16 truncations | u32 0 | u64 seq | truncations × u64 seq | rest
//
// seq is the transaction's number at its coordinator (the ring says
// which coordinator). The truncations are transactions committed at
// every primary: a backup applies their writes and forgets them. rest,
// for recCommitBackup only: the transaction's txInfo, then writes (below).
const recFixed = 16

// MaxTruncations bounds the truncations one record carries.
const MaxTruncations = 64

// record is a decoded record body.
type record struct {
	kind   byte
	shard  int
	seq    uint64
	trunc  []uint64
	info   txInfo
	writes []write
}

// Operations of writes.
const (
	opPut    = 1
	opDelete = 2
)

// write is one buffered write, as LOCK requests and COMMIT-BACKUP
// records carry it:
//
//	u8 op | u8 expect | u8 key length | u8 0 | u32 value length | u64 version | key | value
//
// version is the version the transaction read when expect is 1 (LOCK
// checks it), and the version to install in a COMMIT-BACKUP record.
type write struct {
	op      byte
	expect  bool
	version uint64
	key     []byte
	value   []byte
}

const writeFixed = 16

func appendWrite(b []byte, w *write) []byte {
	var e byte
	if w.expect {
		e = 1
	}
	b = append(b, w.op, e, byte(len(w.key)), 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(w.value)))
	b = binary.LittleEndian.AppendUint64(b, w.version)
	b = append(b, w.key...)
	return append(b, w.value...)
}

// appendWrites encodes u16 count | writes.
func appendWrites(b []byte, ws []write) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ws)))
	for i := range ws {
		b = appendWrite(b, &ws[i])
	}
	return b
}

// parseWrites decodes appendWrites' bytes; the writes alias b.
func parseWrites(b []byte, valueSize int) ([]write, []byte, error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("%w: no write count", ErrProtocol)
	}
	n := int(binary.LittleEndian.Uint16(b))
	b = b[2:]
	ws := make([]write, n)
	for i := range ws {
		if len(b) < writeFixed {
			return nil, nil, fmt.Errorf("%w: a short write", ErrProtocol)
		}
		w := &ws[i]
		w.op, w.expect = b[0], b[1] == 1
		kl, vl := int(b[2]), int(binary.LittleEndian.Uint32(b[4:]))
		w.version = binary.LittleEndian.Uint64(b[8:])
		if (w.op != opPut && w.op != opDelete) || kl < 1 || kl > txn.MaxKey || vl > valueSize || len(b) < writeFixed+kl+vl {
			return nil, nil, fmt.Errorf("%w: a bad write (op %d, key %d B, value %d B)", ErrProtocol, w.op, kl, vl)
		}
		w.key, w.value = b[writeFixed:writeFixed+kl], b[writeFixed+kl:writeFixed+kl+vl]
		b = b[writeFixed+kl+vl:]
	}
	return ws, b, nil
}

// txInfo is what recovery needs to know of a transaction: the shards it
// writes, and at each node the connection (session id, 0 for none) its
// coordinator uses for it — the one connection recovery fences there.
// Encoded: u8 shards | shard ids | u8 nodes | nodes × u32 session id.
type txInfo struct {
	parts []int
	sids  []uint32
}

func (t *txInfo) append(b []byte) []byte {
	b = append(b, byte(len(t.parts)))
	for _, p := range t.parts {
		b = append(b, byte(p))
	}
	b = append(b, byte(len(t.sids)))
	for _, s := range t.sids {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return b
}

// parseTxInfo decodes a txInfo for a database of shards shards (and as
// many nodes).
func parseTxInfo(b []byte, shards int) (txInfo, []byte, error) {
	var t txInfo
	if len(b) < 1 || len(b) < 2+int(b[0]) {
		return t, nil, fmt.Errorf("%w: short participants", ErrProtocol)
	}
	n := int(b[0])
	t.parts = make([]int, n)
	for i := range t.parts {
		if t.parts[i] = int(b[1+i]); t.parts[i] >= shards {
			return t, nil, fmt.Errorf("%w: participant shard %d of %d", ErrProtocol, t.parts[i], shards)
		}
	}
	b = b[1+n:]
	m := int(b[0])
	if m != shards || len(b) < 1+4*m {
		return t, nil, fmt.Errorf("%w: %d sessions for %d nodes", ErrProtocol, m, shards)
	}
	t.sids = make([]uint32, m)
	for i := range t.sids {
		t.sids[i] = binary.LittleEndian.Uint32(b[1+4*i:])
	}
	return t, b[1+4*m:], nil
}

// appendRecord encodes a record body.
func appendRecord(b []byte, r *record) []byte {
	b = append(b, r.kind, byte(r.shard))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.trunc)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, r.seq)
	for _, t := range r.trunc {
		b = binary.LittleEndian.AppendUint64(b, t)
	}
	if r.kind == recCommitBackup {
		b = r.info.append(b)
		b = appendWrites(b, r.writes)
	}
	return b
}

// parseRecord decodes a record body; its writes alias b.
func parseRecord(b []byte, shards, valueSize int) (record, error) {
	var r record
	if len(b) < recFixed {
		return r, fmt.Errorf("%w: a %d-byte record", ErrProtocol, len(b))
	}
	r.kind, r.shard = b[0], int(b[1])
	nt := int(binary.LittleEndian.Uint16(b[2:]))
	r.seq = binary.LittleEndian.Uint64(b[8:])
	b = b[recFixed:]
	if r.kind < recAbort || r.kind > recTruncate || r.shard >= shards || nt > MaxTruncations || len(b) < 8*nt {
		return r, fmt.Errorf("%w: record kind %d shard %d with %d truncations", ErrProtocol, r.kind, r.shard, nt)
	}
	r.trunc = make([]uint64, nt)
	for i := range r.trunc {
		r.trunc[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	b = b[8*nt:]
	if r.kind != recCommitBackup {
		return r, nil
	}
	var err error
	if r.info, b, err = parseTxInfo(b, shards); err != nil {
		return r, err
	}
	r.writes, _, err = parseWrites(b, valueSize)
	return r, err
}

// A LOCK request (MethodLock): u64 seq | u8 shard | txInfo | writes.
// The answer: u8 status, then for lockOK the version each write found
// (it installs that plus one), else u16 the index of the write that
// failed.
const (
	lockOK      = 0
	lockLocked  = 1 // another transaction holds a lock
	lockChanged = 2 // the version is not the one read
	lockFull    = 3 // no slot for a new key
)

// lockFixed is the fixed part of a LOCK request.
const lockFixed = 9
