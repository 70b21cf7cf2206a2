package ford

// Kill cuts db's connections as a crash of its process would: nothing
// is released, truncated or freed.
func Kill(db *DB) {
	db.closed.Store(true)
	db.teardown()
}

// CoordID is the coordinator id tx runs under.
func CoordID(tx *Tx) int { return tx.c.id }
