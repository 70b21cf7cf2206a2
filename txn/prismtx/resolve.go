package prismtx

import "context"

// resolve settles prepared timestamp p, found in key ki's slot (at node
// c) with PW = p > C after p's lease ran out: its client died between
// prepare and the end of its commit, or is that slow. The decision
// record of p's client id says what p became, and the first to write it
// decides:
//
//   - one CAS on the record writes ⟨p, abort⟩ unless it holds p's verdict
//     or a later timestamp's already;
//   - the record says abort (this CAS or an earlier one): C = p if C < p,
//     the abort cleanup the owner would have done — the key is free, its
//     committed version unchanged;
//   - the record says commit: the owner decided before it stopped, so the
//     write is rolled forward with the owner's own install CAS (C < p:
//     swap in ⟨pendTS, pendPtr⟩, the version the owner ALLOCATEd at
//     prepare);
//   - the record holds a later timestamp: the owner finished p before it
//     started that transaction (an id's transactions run one at a time,
//     and an id whose transaction ended unresolved is never used again),
//     so there is nothing to do.
//
// Every step is a CAS that does nothing when repeated, so owners and any
// number of resolvers may run them at once.
func (db *DB) resolve(ctx context.Context, c *conn, ki *keyInfo, p uint64, rounds *int) error {
	rc := db.conns[int(idOf(p))%len(db.conns)]
	ch, err := rc.acquire(ctx, listCap)
	if err != nil {
		return err
	}
	decide(ch, idOf(p), p, verdictAbort)
	if _, err := ch.run(ctx); err != nil {
		return err
	}
	*rounds++
	ts, verdict := ch.word(0), ch.word(1)
	ch.release()
	if ts > p {
		return nil
	}
	if ch, err = c.acquire(ctx, listCap); err != nil {
		return err
	}
	slot := c.lay.slot(ki.slot)
	commit := ts == p && verdict == verdictCommit
	if commit {
		install(ch, slot, p)
	} else {
		raiseC(ch, slot, p)
	}
	if _, err := ch.run(ctx); err != nil {
		return err
	}
	*rounds++
	if commit && ch.word(wC) < p {
		c.giveBack(ch.word(wPtr))
	}
	ch.release()
	db.stats.resolved.Add(1)
	return nil
}
