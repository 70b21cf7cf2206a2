package ford

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/txn"
)

// A coordinator's log lives on F+1 nodes (logCopies, coord.go): its
// record goes to every copy live in its view in one round (a list per
// node, still one round trip), and recovery reads every live copy, so
// that the death of one node — the coordinator's first log node
// included — loses no decided transaction (doc.go, Failover).

// logLists are the lists WRITing n bytes of c's buffer at loc to every
// live copy of coordinator id's log area, one per node.
func (db *DB) logLists(c *coord, id, loc, n int) []list {
	var b byNode
	for _, l := range db.logCopies(c.v, id) {
		b.add(l.node, c.write(l.node, l.off, loc, n))
	}
	return b.lists
}

// writeLogCopies WRITEs the n-byte record in c's log buffer to every
// live copy of coordinator id's log area: one round (posted only while
// c's view allows).
func (db *DB) writeLogCopies(ctx context.Context, c *coord, id, n int) error {
	lists := db.logLists(c, id, db.arena.logBuf, n)
	if len(lists) == 0 {
		return fmt.Errorf("%w: no copy of coordinator %d's log is live", txn.ErrUnreachable, id)
	}
	return db.recoveryRound(ctx, c, lists)
}

// readLogs READs every live copy of coordinator id's log area into rc's
// log buffer (one round) and returns the valid records among them,
// copied out of the buffer. An unreachable copy fails the call: a
// decision must see every copy its view holds.
func (db *DB) readLogs(ctx context.Context, rc *coord, id int) ([]logRecord, error) {
	if id >= db.n*db.lay.Coordinators {
		return nil, nil
	}
	a, size := &db.arena, db.lay.LogSize
	copies := db.logCopies(rc.v, id)
	if len(copies) == 0 {
		return nil, fmt.Errorf("%w: no copy of coordinator %d's log is live", txn.ErrUnreachable, id)
	}
	var b byNode
	for i, l := range copies {
		b.add(l.node, rc.read(l.node, l.off, a.logBuf+i*size, size))
	}
	if err := db.iss.round(ctx, rc, b.lists); err != nil {
		return nil, roundErr(err, nil)
	}
	var out []logRecord
	for i := range copies {
		rec, err := decodeLog(rc.buf[a.logBuf+i*size:a.logBuf+(i+1)*size], &db.lay, db.n)
		if err != nil {
			continue
		}
		for k := range rec.entries {
			e := &rec.entries[k]
			e.key, e.value = append([]byte(nil), e.key...), append([]byte(nil), e.value...)
		}
		out = append(out, rec)
	}
	return out, nil
}

// replicate WRITEs rec to every live copy of coordinator id's log area:
// what a recoverer does before it acts on a record, so that the record
// outlives the death of the copy it was found on (a coordinator that
// died during its log round may have left it on some copies only).
func (db *DB) replicate(ctx context.Context, rc *coord, id int, rec logRecord) error {
	n := recordLen(rec.entries)
	encodeLog(rc.buf[db.arena.logBuf:], rec.lock, rec.entries)
	return db.writeLogCopies(ctx, rc, id, n)
}

// truncateLog truncates coordinator c's own log on every live copy,
// posted and not waited for.
func (db *DB) truncateLog(c *coord) error {
	return db.iss.post(c, db.logLists(c, c.id, db.arena.zero, 8))
}
