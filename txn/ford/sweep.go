package ford

import (
	"context"
	"encoding/binary"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Swept says what Sweep found.
type Swept struct {
	Live      int // copies locked under a lease not over yet
	Recovered int // expired locks recovered (rolled forward or back)
}

// heldLock is a locked copy a scan found.
type heldLock struct {
	w           lockWord
	shard, slot int
}

// Sweep READs every slot of every copy and recovers each lock whose
// lease is over: what a recovery command runs after a coordinator's
// death, so that no lock waits for a client to stumble on it.
func (db *DB) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	db.life.RLock()
	defer db.life.RUnlock()
	if db.closed.Load() {
		return out, txn.ErrClosed
	}
	v, err := db.current(ctx)
	if err != nil {
		return out, err
	}
	held, err := db.scanLocks(ctx, v)
	if err != nil {
		return out, err
	}
	for _, h := range held {
		if !h.w.expired(now(), db.cfg.Skew) {
			out.Live++
			continue
		}
		if _, err := db.recoverLock(ctx, v, h.w, h.shard, h.slot); err != nil {
			return out, err
		}
		out.Recovered++
	}
	return out, nil
}

// scanLocks lists every locked copy on the nodes live in v (by slot,
// once per lock word).
func (db *DB) scanLocks(ctx context.Context, v *view) ([]heldLock, error) {
	db.smu.Lock()
	defer db.smu.Unlock()
	c, a := db.setup, &db.arena
	c.v = v
	size, nodes := db.lay.SlotSize(), db.n
	seen := map[heldLock]bool{}
	var out []heldLock
	for nd := range db.nodes {
		if !db.live(v, nd) {
			continue
		}
		for i := 0; i <= db.lay.F; i++ {
			s := (nd - i + nodes) % nodes
			for first := 0; first < db.lay.Buckets; first += MaxProbe {
				count := min(MaxProbe, db.lay.Buckets-first)
				off := db.lay.slotOff(nd, s, first, nodes)
				if err := db.iss.round(ctx, c, []list{{node: nd, wrs: []verbs.SendWR{c.read(nd, off, a.window, count*size)}}}); err != nil {
					return nil, roundErr(err, nil)
				}
				for k := range count {
					if w := binary.LittleEndian.Uint64(c.buf[a.window+k*size:]); w != 0 {
						h := heldLock{lockWord(w), s, first + k}
						if !seen[h] {
							seen[h] = true
							out = append(out, h)
						}
					}
				}
			}
		}
	}
	return out, nil
}
