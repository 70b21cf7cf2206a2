package prismtx

import (
	"context"

	"github.com/rdmakit/rdmakit/verbs"
)

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
//     swap in ⟨pendPtr, pendTS⟩, the version the owner ALLOCATEd at
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

// rollIfCommitted rolls prepared timestamp p on key ki forward if p's
// decision record already says commit: its owner returned from Commit
// and is installing its writes on other nodes in the background (or
// died doing so). Installing a committed write needs no lease, so a GET
// that meets one does not wait for the owner: it reads the record (a
// CAS that swaps nothing: an atomic 16-byte read), installs, and reads
// again — so a transaction that begins after another's Commit returned
// sees its writes. It reports whether p was committed.
func (db *DB) rollIfCommitted(ctx context.Context, c *conn, ki *keyInfo, p uint64, rounds *int) (bool, error) {
	rc := db.conns[int(idOf(p))%len(db.conns)]
	ch, err := rc.acquire(ctx, listCap)
	if err != nil {
		return false, err
	}
	ch.sgl[0] = ch.sge(offOld, 16)
	ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: rc.lay.record(idOf(p)), RKey: rc.lay.RKey, SGL: ch.sgl[0:1],
		Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpEqual}}
	ch.wrs = ch.wrs[:1]
	if _, err := ch.run(ctx); err != nil {
		return false, err
	}
	*rounds++
	ts, verdict := ch.word(0), ch.word(1)
	ch.release()
	if ts != p || verdict != verdictCommit {
		return false, nil
	}
	if ch, err = c.acquire(ctx, listCap); err != nil {
		return false, err
	}
	install(ch, c.lay.slot(ki.slot), p)
	if _, err := ch.run(ctx); err != nil {
		return false, err
	}
	*rounds++
	if ch.word(wC) < p {
		c.giveBack(ch.word(wPtr))
	}
	ch.release()
	return true, nil
}
