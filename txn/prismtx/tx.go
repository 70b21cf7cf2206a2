package prismtx

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Tx is a PRISM-TX transaction: it implements txn.Tx and txn.Traced.
// Reads go to the nodes (one round trip each, once the key's slot is
// known); writes are buffered until Commit (commit.go).
type Tx struct {
	db     *DB
	ctx    context.Context
	reads  map[string]*readEntry
	writes map[string]*writeEntry
	order  []string // written keys, in first-write order
	done   bool
	rounds int
	help   []help

	tr struct{ reads, writes []txn.Access }
}

var (
	_ txn.Tx     = (*Tx)(nil)
	_ txn.Traced = (*Tx)(nil)
)

// readEntry is a key the transaction read: the version it read (ver, its
// timestamp, or 0 for a key never written) and the RC it validates
// against: the slot's C when that is newer than the version (an aborted
// writer's cleanup raised it, installing nothing).
type readEntry struct {
	c      *conn
	ki     *keyInfo
	rc     uint64
	ver    uint64
	absent bool // no record: never written, or deleted
	value  []byte
}

// writeEntry is a buffered write.
type writeEntry struct {
	del   bool
	value []byte
}

// Get implements txn.Tx.
func (tx *Tx) Get(key []byte) ([]byte, error) {
	if tx.done {
		return nil, txn.ErrDone
	}
	if err := txn.Check(key, nil); err != nil {
		return nil, err
	}
	if w, ok := tx.writes[string(key)]; ok {
		if w.del {
			return nil, txn.ErrNotFound
		}
		return bytes.Clone(w.value), nil
	}
	r, err := tx.read(key)
	if err != nil {
		return nil, err
	}
	if r.absent {
		return nil, txn.ErrNotFound
	}
	return bytes.Clone(r.value), nil
}

// read returns key's read entry, reading it from its node the first time.
func (tx *Tx) read(key []byte) (*readEntry, error) {
	if r, ok := tx.reads[string(key)]; ok {
		return r, nil
	}
	db := tx.db
	db.life.RLock() // the DB does not close under the read
	defer db.life.RUnlock()
	if db.closed.Load() {
		return nil, txn.ErrClosed
	}
	r, err := db.fetch(tx.ctx, key, &tx.rounds)
	if err != nil {
		return nil, err
	}
	tx.reads[string(key)] = r
	return r, nil
}

// Put implements txn.Tx: a blind write (the key is not read).
func (tx *Tx) Put(key, value []byte) error {
	if tx.done {
		return txn.ErrDone
	}
	if err := txn.Check(key, value); err != nil {
		return err
	}
	tx.write(key, &writeEntry{value: bytes.Clone(value)})
	return nil
}

func (tx *Tx) write(key []byte, w *writeEntry) {
	if _, ok := tx.writes[string(key)]; !ok {
		tx.order = append(tx.order, string(key))
	}
	tx.writes[string(key)] = w
}

// Insert implements txn.Tx: it reads the key (the read validates that it
// is still absent at commit) and fails with txn.ErrExists if it has a
// record.
func (tx *Tx) Insert(key, value []byte) error {
	if _, err := tx.Get(key); err == nil {
		return fmt.Errorf("%w: %q", txn.ErrExists, key)
	} else if err != txn.ErrNotFound {
		return err
	}
	if err := txn.Check(key, value); err != nil {
		return err
	}
	tx.write(key, &writeEntry{value: bytes.Clone(value)})
	return nil
}

// Delete implements txn.Tx: it reads the key and writes a tombstone
// version.
func (tx *Tx) Delete(key []byte) error {
	if _, err := tx.Get(key); err != nil {
		return err
	}
	tx.write(key, &writeEntry{del: true})
	return nil
}

// Abort implements txn.Tx: nothing was written to the nodes before
// Commit.
func (tx *Tx) Abort() { tx.done = true }

// Trace implements txn.Traced: after Commit returned nil, each key read
// with the timestamp of the version read (0 for a key never written), and
// each key written with the transaction's timestamp, the version it
// installed.
func (tx *Tx) Trace() (reads, writes []txn.Access) { return tx.tr.reads, tx.tr.writes }

// maxRereads bounds the READs of one GET: a version longer than the
// bytes read, an item that does not decode, a prepared timestamp resolved.
const maxRereads = 6

// fetch reads key's committed version with one list: a READ of the
// slot's first half (PW, PR, ptr, C) and a bounded indirect READ through
// ⟨ptr, C⟩ (under the NIC's atomics lock: never half an install). The
// two are not one atomic read; the version read is never older than the
// slot read, so RC = max(C, version's timestamp) (see readEntry). A slot with a prepared writer (PW > C) costs a look at its
// decision: committed, the write is rolled forward (rollIfCommitted);
// past its lease, it is resolved (resolve.go); then the key is read
// again.
func (db *DB) fetch(ctx context.Context, key []byte, rounds *int) (*readEntry, error) {
	c, ki, err := db.lookup(ctx, key, rounds)
	if err != nil {
		return nil, err
	}
	size := db.cfg.ReadSize
	if n := int(ki.size.Load()); n > 0 {
		size = n
	}
	looked := false // at a prepared writer's decision: once per GET
	for range maxRereads {
		ch, err := c.acquire(ctx, 2)
		if err != nil {
			return nil, err
		}
		slot := c.lay.slot(ki.slot)
		ch.sgl[0] = ch.sge(offOld, 32)
		ch.sgl[1] = ch.sge(offItem, size)
		ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpRead, RemoteAddr: slot, RKey: c.lay.RKey, SGL: ch.sgl[0:1]}
		ch.wrs[1] = verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.FlagIndirect | verbs.FlagBounded, RemoteAddr: slot + 8*wPtr,
			RKey: c.lay.RKey, SGL: ch.sgl[1:2]}
		*rounds++
		wc, err := ch.run(ctx)
		if err != nil {
			return nil, err
		}
		if wc.ByteLen == 0 {
			// C = 0, the bound: a key never written (the absent item).
			putItem(ch.buf[offItem:], 0, nil, nil, flagAbsent)
		}
		pw := binary.NativeEndian.Uint64(ch.buf[offOld+8*wPW:])
		cs := binary.NativeEndian.Uint64(ch.buf[offOld+8*wC:])
		it, ok := readHead(ch.buf[offItem:])
		if ok && it.size() > size {
			size = it.size()
			ki.size.Store(int32(size))
			ch.release()
			continue
		}
		if !ok || (it.flags&flagAbsent == 0 && !bytes.Equal(ch.buf[offItem+itemHead:offItem+itemHead+it.klen], key)) {
			ch.release()
			if ok {
				return nil, fmt.Errorf("%w: %q", ErrKeyCollision, key)
			}
			continue
		}
		if pw > cs && !looked {
			// A prepared writer: committed (installing in the
			// background) → roll it forward; past its lease → resolve
			// it; else it is not committed, and the version to read is
			// the committed one. Either way, read again.
			ch.release()
			rolled, err := db.rollIfCommitted(ctx, c, ki, pw, rounds)
			if err != nil {
				return nil, err
			}
			if !rolled && expired(pw, time.Now(), db.cfg.Lease) {
				if err := db.resolve(ctx, c, ki, pw, rounds); err != nil {
					return nil, err
				}
			}
			looked = true
			continue
		}
		r := &readEntry{c: c, ki: ki, rc: max(cs, it.ts), ver: it.ts, absent: it.flags&(flagAbsent|flagTomb) != 0}
		if !r.absent {
			off := offItem + itemHead + it.klen
			r.value = bytes.Clone(ch.buf[off : off+it.vlen])
		}
		ch.release()
		ki.c.Store(r.rc)
		return r, nil
	}
	return nil, fmt.Errorf("%w: key %q: its version did not read whole in %d tries", txn.ErrUnreachable, key, maxRereads)
}
