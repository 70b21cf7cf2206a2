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
// offset off of its log area), as a torn or corrupted WRITE would.
func CorruptLog(db *DB, id, off int) error {
	db.smu.Lock()
	defer db.smu.Unlock()
	c, a := db.setup, &db.arena
	n, base := db.logLoc(id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.read(n, base+int64(off), a.window, 8)}}}); err != nil {
		return err
	}
	c.buf[a.window] ^= 0x5a
	return db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.write(n, base+int64(off), a.window, 8)}}})
}

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
	off := db.lay.slotOff(n, txn.Shard(key, len(db.nodes)), v.(int), len(db.nodes)) + slotValue
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.read(n, off, a.window, 8)}}}); err != nil {
		return err
	}
	c.buf[a.window] ^= 0x5a
	return db.iss.round(ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.write(n, off, a.window, 8)}}})
}
