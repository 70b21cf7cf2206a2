package ford

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// coord is a coordinator context: a claimed coordinator id, its log areas
// (on its log node and the F next: logCopies), a registered buffer, the
// view its rounds route by, and the channel its completions
// come back on. A transaction holds one from Begin to its end, so an id
// has one transaction at a time.
type coord struct {
	db      *DB
	idx     int   // index in db.coords (wr_ids carry it)
	id      int   // global coordinator id: log node × Coordinators + index there (-1: setup)
	logNode int   // the node of its claim word and first log copy
	v       *view // the view its rounds route by (its transaction's)
	mr      verbs.MR
	buf     []byte
	done    chan verbs.WC
	seq     uint32
	last    lockWord // the last lock word handed out: words only grow
	broken  bool     // lists it could not wait out, or a stopped commit
}

// arena is the layout of a coordinator's buffer (offsets):
//
//	zero     8 zero bytes: the source of unlocks and truncations
//	results  CAS results, 8 bytes per copy a round locks or releases
//	window   a lookup's READ of up to MaxProbe slots
//	logBuf   the log record (LogSize), or F+1 copies of one a recovery reads
//	images   the new images a commit writes (LogSize)
//	checks   a validation's lock and version words, 16 bytes per read
type arena struct {
	zero, results, window, logBuf, images, checks, size int
	maxCopies, maxReads                                 int
}

func newArena(l *Layout) arena {
	a := arena{zero: 0, results: 64, maxCopies: (l.F + 1) * (l.LogSize/entryHead + 1), maxReads: 4096}
	a.window = a.results + (8*a.maxCopies+63)&^63
	a.logBuf = a.window + MaxProbe*l.SlotSize()
	a.images = a.logBuf + (l.F+1)*l.LogSize
	a.checks = a.images + 4*l.LogSize
	a.size = a.checks + 16*a.maxReads
	return a
}

// newCoord registers a coordinator's buffer: index idx, id id (its log
// area follows from it; -1 for the setup coordinator, which has none).
func (db *DB) newCoord(idx, id int) (*coord, error) {
	if idx+1 >= len(db.coords) {
		return nil, fmt.Errorf("%w: %d coordinators (stopped ones are never reused)", txn.ErrFull, idx)
	}
	mr, err := db.pd.AllocMR(db.arena.size, verbs.AccessLocalWrite)
	if err != nil {
		return nil, fmt.Errorf("ford: a coordinator's buffer: %w", err)
	}
	c := &coord{db: db, idx: idx + 1, id: id, mr: mr, buf: mr.Bytes(), done: make(chan verbs.WC, 256)}
	if idx < 0 {
		c.idx = 0
	}
	if id >= 0 {
		c.logNode = id / db.lay.Coordinators
	}
	c.v = db.view.Load()
	db.coords[c.idx].Store(c)
	return c, nil
}

// word is the 8-byte word of the buffer at loc.
func (c *coord) word(loc int) uint64 { return binary.LittleEndian.Uint64(c.buf[loc:]) }

// nextLock is a new lock word of c with a lease to now+lease, greater
// than every word c handed out before.
func (c *coord) nextLock(now time.Time) lockWord {
	w := makeLock(c.id, now.Add(c.db.cfg.Lease))
	if w <= c.last {
		w = c.last + 1
	}
	c.last = w
	return w
}

// logCopy is a copy of a coordinator's log area: its node and offset.
type logCopy struct {
	node int
	off  int64
}

// logCopies are the copies of coordinator id's log area on the nodes
// live in v: copy j (0 to F) on node (id div C + j) mod nodes, in area
// j·C + id mod C there.
func (db *DB) logCopies(v *view, id int) []logCopy {
	per := db.lay.Coordinators
	var out []logCopy
	for j := 0; j <= db.lay.F; j++ {
		n := (id/per + j) % db.n
		if db.live(v, n) {
			out = append(out, logCopy{n, db.lay.offLogs() + int64(j*per+id%per)*int64(db.lay.LogSize)})
		}
	}
	return out
}
