package ford

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// ErrCorrupt: a slot failed its checksum (or its bounds) on every READ
// of a bounded series — not a write racing the reads but memory that
// does not hold a slot. Not an abort: running the transaction again
// would not help.
var ErrCorrupt = errors.New("ford: corrupt slot")

// errTorn: a slot read under the transaction's own lock failed its
// checksum.
var errTorn = fmt.Errorf("%w: torn under a lock", ErrCorrupt)

// tornTries is how many times a READ that raced a write is repeated at
// once; past them it is repeated every tornPause until the slot has been
// torn for tornWait. A software NIC copies a WRITE on a CPU that the OS
// may deschedule mid-copy, leaving the slot torn for milliseconds: a
// reader on another QP (another client, or another Smart-DTX worker)
// sees it torn all that time. Only a slot torn for longer is corrupt.
const (
	tornTries = 64
	tornPause = 200 * time.Microsecond
	tornWait  = 100 * time.Millisecond
)

// now is the clock of leases.
func now() time.Time { return time.Now() }

// roundErr is the error of a failed round in an operation on key: a
// Timeout abort for an ended context, else the connection's error.
func roundErr(err error, key []byte) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, txn.ErrUnreachable) || errors.Is(err, txn.ErrAborted) {
		return err
	}
	return txn.Abort(txn.Timeout, key, err)
}

// lookup finds r's key in the copy of its shard on node n: its slot and
// the slot's content, or (key absent) the first empty slot of its window
// with that slot's content, or -1 when the window is full of other keys.
// One READ when the slot is known (cached) or in the window's first
// FirstProbe slots.
func (t *Tx) lookup(r *rec, n int) (int, object, error) {
	db := t.db
	if known, ok := db.keys.Load(string(r.key)); ok {
		s, err := t.readSlots(r, n, known.(int), 1)
		if err != nil {
			return 0, object{}, err
		}
		if bytes.Equal(s[0].key, r.key) {
			return known.(int), s[0], nil
		}
		db.keys.Delete(string(r.key)) // not where it was: only a hostile node moves keys
	}
	home := db.lay.home(txn.Hash(r.key))
	for _, part := range [][2]int{{0, FirstProbe}, {FirstProbe, MaxProbe}} {
		objs, err := t.readSlots(r, n, home+part[0], part[1]-part[0])
		if err != nil {
			return 0, object{}, err
		}
		for i, o := range objs {
			if o.klen == 0 && t.lock != 0 && o.lock == uint64(t.lock) {
				continue // an empty slot this transaction claimed for another key
			}
			if o.klen == 0 {
				return home + part[0] + i, o, nil
			}
			if bytes.Equal(o.key, r.key) {
				db.keys.Store(string(r.key), home+part[0]+i)
				return home + part[0] + i, o, nil
			}
		}
	}
	return -1, object{}, nil
}

// readSlots READs count slots from first in the copy on node n, again
// while one is torn; the objects' keys and values are copies.
func (t *Tx) readSlots(r *rec, n, first, count int) ([]object, error) {
	db, c, a := t.db, t.c, &t.db.arena
	size := db.lay.SlotSize()
	off := db.lay.slotOff(n, r.shard, first, len(db.nodes))
	objs := make([]object, count)
	start := time.Now()
	for try := 0; ; try++ {
		if err := db.iss.round(t.ctx, c, []list{{node: n, wrs: []verbs.SendWR{c.read(n, off, a.window, count*size)}}}); err != nil {
			return nil, roundErr(err, r.key)
		}
		torn := false
		for i := range objs {
			o, ok := decodeSlot(c.buf[a.window+i*size:a.window+(i+1)*size], db.lay.ValueSize)
			if !ok {
				torn = true
				break
			}
			o.key, o.value = bytes.Clone(o.key), bytes.Clone(o.value)
			objs[i] = o
		}
		if !torn {
			return objs, nil
		}
		if try < tornTries {
			runtime.Gosched()
			continue
		}
		if time.Since(start) >= tornWait {
			return nil, fmt.Errorf("%w: %d READs of %q's window on node %d in %v", ErrCorrupt, try+1, r.key, n, tornWait)
		}
		time.Sleep(tornPause)
	}
}
