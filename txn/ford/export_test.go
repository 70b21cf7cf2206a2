package ford

import (
	"context"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Kill cuts db's connections as a crash of its process would: nothing
// is released, truncated or freed.
func Kill(db *DB) {
	db.closed.Store(true)
	db.teardown()
}

// CoordID is the coordinator id tx runs under.
func CoordID(tx *Tx) int { return tx.c.id }

// CorruptLog flips a byte of the log record of coordinator id (at
// offset off of its log area) on every copy of the log, as torn or
// corrupted WRITEs would.
func CorruptLog(db *DB, id, off int) error {
	db.smu.Lock()
	defer db.smu.Unlock()
	c, a := db.setup, &db.arena
	c.v = db.view.Load()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, l := range db.logCopies(c.v, id) {
		n, base := l.node, l.off
		if err := db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.read(n, base+int64(off), a.window, 8)}}}); err != nil {
			return err
		}
		c.buf[a.window] ^= 0x5a
		if err := db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.write(n, base+int64(off), a.window, 8)}}}); err != nil {
			return err
		}
	}
	return nil
}

// CorruptLogCopy flips a byte of copy j's log record of coordinator id
// (at offset off), the other copies left whole.
func CorruptLogCopy(db *DB, id, j, off int) error {
	db.smu.Lock()
	defer db.smu.Unlock()
	c, a := db.setup, &db.arena
	c.v = db.view.Load()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l := db.logCopies(c.v, id)[j]
	if err := db.iss.round(ctx, c, []list{{node: l.node, wrs: []verbs.SendWR{c.read(l.node, l.off+int64(off), a.window, 8)}}}); err != nil {
		return err
	}
	c.buf[a.window] ^= 0x5a
	return db.iss.round(ctx, c, []list{{node: l.node, wrs: []verbs.SendWR{c.write(l.node, l.off+int64(off), a.window, 8)}}})
}

// Freeze stops db renewing its lease on the configuration, as a client
// cut from the membership.
func Freeze(db *DB) { db.frozen.Store(true) }

// LogNode is the node of the first copy of coordinator id's log.
func LogNode(db *DB, id int) int { return id / db.lay.Coordinators }

// CorruptSlot flips a byte of the value of key's slot on node n (the
// key must have been looked up by db).
func CorruptSlot(db *DB, key []byte, n int) error {
	v, ok := db.keys.Load(string(key))
	if !ok {
		return ErrCorrupt
	}
	db.smu.Lock()
	defer db.smu.Unlock()
	c, a := db.setup, &db.arena
	c.v = db.view.Load()
	off := db.lay.slotOff(n, txn.Shard(key, db.n), v.(int), db.n) + slotValue
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.read(n, off, a.window, 8)}}}); err != nil {
		return err
	}
	c.buf[a.window] ^= 0x5a
	return db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.write(n, off, a.window, 8)}}})
}

// PendingTrace is tx's trace as if it committed: for a transaction whose
// outcome is unknown, to be resolved by what the nodes hold.
func PendingTrace(tx *Tx) (reads, writes []txn.Access) {
	if tx == nil || tx.committed {
		return nil, nil
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.trace()
	return tx.reads, tx.writes
}
