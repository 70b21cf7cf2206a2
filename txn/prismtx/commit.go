package prismtx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// pkey is one key of a committing transaction.
type pkey struct {
	key    string
	c      *conn
	ki     *keyInfo
	r      *readEntry  // nil for a blind write
	w      *writeEntry // nil for a key only read
	g      uint64      // a write's expected PW = C
	locked bool        // its PW is this transaction's timestamp
	pend   uint64      // the pending version's buffer
	ch     *chain      // while a phase runs
	item   int         // the pending version's length
}

// help is a prepared timestamp a commit met on a key.
type help struct {
	k *pkey
	p uint64
}

// commitWait bounds the waits of a commit once it has begun: a
// transaction is not left half-way because its caller's context ended.
const commitWait = 5 * time.Second

// stale is how many times a blind write's validation is retried with the
// PW = C it found, when its guess was out of date.
const staleRetries = 2

// Commit implements txn.Tx: prepare (validation at every node, one round
// trip), then the decision (one CAS on the client id's record) with the
// installation of the writes on the record's node in the same list (one
// round trip); the writes on other nodes are installed in the background
// (or, with Config.SyncInstall, in one more round trip). A read-only
// transaction stops after prepare. See the package documentation.
func (tx *Tx) Commit() error {
	if tx.done {
		return txn.ErrDone
	}
	tx.done = true
	db := tx.db
	db.life.RLock()
	defer db.life.RUnlock()
	if db.closed.Load() {
		return txn.ErrClosed
	}
	if err := tx.ctx.Err(); err != nil {
		return tx.aborted(txn.Abort(txn.Timeout, nil, err))
	}
	keys, err := tx.keys()
	if err != nil {
		return err
	}
	if len(keys) == 0 || (len(tx.writes) == 0 && db.cfg.SkipValidation) {
		return tx.committed(0)
	}
	coord := tx.coordinator(keys)
	id, err := db.takeID(tx.ctx, coord)
	if err != nil {
		return err
	}
	floor := id.last
	for _, k := range keys {
		floor = max(floor, k.g)
		if k.r != nil {
			floor = max(floor, k.r.rc)
		}
	}
	ts := nextStamp(time.Now(), id.id, floor)
	id.last = ts
	// Each step's waits are bounded by commitWait, not by the caller's
	// context: a transaction is not left half-way because it ended.
	step := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(tx.ctx), commitWait)
	}
	ctx, cancel := step()
	ab, err := tx.prepare(ctx, keys, ts)
	cancel()
	if ab != nil || err != nil {
		return tx.abortStep(step, id, keys, ts, ab, err)
	}
	if len(tx.writes) == 0 {
		db.putID(id, true)
		return tx.committed(ts)
	}
	hook(hookPrepared, db)
	if err := tx.ctx.Err(); err != nil {
		return tx.abortStep(step, id, keys, ts, txn.Abort(txn.Timeout, nil, err), nil)
	}
	ctx, cancel = step()
	rest, won, err := tx.decide(ctx, id, ts, keys)
	cancel()
	if err != nil {
		db.putID(id, false) // the verdict is unknown: resolvers settle it after the lease
		return fmt.Errorf("%w: the commit decision did not answer (the transaction may have committed): %w", txn.ErrUnreachable, err)
	}
	if !won {
		return tx.abortStep(step, id, keys, ts, txn.Abort(txn.Timeout, nil, errLeaseLost), nil)
	}
	hook(hookDecided, db)
	// The transaction is committed: resolvers would roll the rest
	// forward. The writes on other nodes are installed in the background
	// unless Config.SyncInstall says to wait for them.
	if len(rest) == 0 {
		db.putID(id, true)
		return tx.committed(ts)
	}
	if db.cfg.SyncInstall {
		ctx, cancel = step()
		db.putID(id, tx.install(ctx, rest, ts))
		cancel()
		tx.rounds++
		return tx.committed(ts)
	}
	db.bg.Add(1)
	go func() {
		defer db.bg.Done()
		ctx, cancel := step()
		db.putID(id, tx.install(ctx, rest, ts))
		cancel()
		db.stats.background.Add(1)
	}()
	return tx.committed(ts)
}

// coordinator is the node whose decision record a transaction uses: the
// one with most of its writes (installed in the decision's own list), or
// its first key's for a read-only transaction.
func (tx *Tx) coordinator(keys []*pkey) int {
	n := make([]int, len(tx.db.conns))
	best := keys[0].c.idx
	for _, k := range keys {
		if k.w != nil {
			n[k.c.idx]++
			if n[k.c.idx] > n[best] {
				best = k.c.idx
			}
		}
	}
	return best
}

// abortStep is abort with a fresh step context.
func (tx *Tx) abortStep(step func() (context.Context, context.CancelFunc), id *clientID, keys []*pkey, ts uint64, ab *txn.AbortError, err error) error {
	ctx, cancel := step()
	defer cancel()
	return tx.abort(ctx, id, keys, ts, ab, err)
}

// errLeaseLost: another client resolved the transaction's prepared
// timestamp (aborted it) after its lease ran out.
var errLeaseLost = errors.New("prismtx: lease ran out; another client aborted the transaction")

// keys lists the transaction's keys, reads first then writes, each with
// its slot (looking up the slots of blind writes).
func (tx *Tx) keys() ([]*pkey, error) {
	var keys []*pkey
	for k, r := range tx.reads {
		if _, ok := tx.writes[k]; !ok {
			keys = append(keys, &pkey{key: k, c: r.c, ki: r.ki, r: r})
		}
	}
	slices.SortFunc(keys, func(a, b *pkey) int { return compareStrings(a.key, b.key) })
	for _, k := range tx.order {
		p := &pkey{key: k, w: tx.writes[k]}
		if r, ok := tx.reads[k]; ok {
			p.c, p.ki, p.r, p.g = r.c, r.ki, r, r.rc
		} else {
			c, ki, err := tx.db.lookup(tx.ctx, []byte(k), &tx.rounds)
			if err != nil {
				return nil, err
			}
			p.c, p.ki, p.g = c, ki, ki.c.Load()
		}
		keys = append(keys, p)
	}
	return keys, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// prepare validates every key: the chains of all keys posted at once,
// then their results (one round trip); blind writes whose guess of PW =
// C was out of date go again. It returns the abort, if any (with the
// keys whose PW it raised marked locked), or a connection's error.
func (tx *Tx) prepare(ctx context.Context, keys []*pkey, ts uint64) (*txn.AbortError, error) {
	db := tx.db
	todo := make([]*pkey, 0, len(keys))
	for _, k := range keys {
		if k.w != nil || !db.cfg.SkipValidation {
			todo = append(todo, k)
		}
	}
	var ab *txn.AbortError
	fail := func(r txn.Reason, k *pkey) {
		if ab == nil {
			ab = txn.Abort(r, []byte(k.key), nil)
		}
	}
	for try := 0; len(todo) > 0; try++ {
		var again []*pkey
		build := func(k *pkey, ch *chain) {
			slot := k.c.lay.slot(k.ki.slot)
			if k.w == nil {
				readValidate(ch, slot, k.r.rc, ts)
				return
			}
			k.item = itemLen(len(k.key), len(k.w.value))
			flags := byte(0)
			if k.w.del {
				flags = flagTomb
			}
			putItem(ch.buf[offItem:], ts, []byte(k.key), k.w.value, flags)
			writeValidate(ch, slot, k.g, ts, k.item)
		}
		take := func(k *pkey, ch *chain) {
			if k.w == nil {
				if pw := ch.word(wPW); pw != k.r.rc {
					tx.met(pw, k)
					fail(txn.ValidationFailed, k)
				}
				return
			}
			pw, pr, c := ch.word(wPW), ch.word(wPR), ch.word(wC)
			if pw == k.g && c == k.g {
				k.locked, k.pend = true, readAddr(ch)
				switch {
				case binary.NativeEndian.Uint64(ch.buf[offPendOld+8:]) >= ts:
					// The pending version was not set: ts was resolved
					// (aborted) and the key taken while the chain ran.
					fail(txn.Timeout, k)
				case pr >= ts && !db.cfg.SkipValidation:
					fail(txn.ValidationFailed, k)
				}
				return
			}
			k.ki.c.Store(c)
			switch {
			case pw != c:
				tx.met(pw, k)
				fail(txn.LockConflict, k)
			case k.r != nil && !db.cfg.SkipValidation, ts <= c, try >= staleRetries:
				fail(txn.ValidationFailed, k)
			default:
				k.g = c // a blind write's stale guess: again with what the slot holds
				again = append(again, k)
			}
		}
		if err := db.phase(ctx, todo, build, take); err != nil {
			return nil, err
		}
		tx.rounds++
		if ab != nil {
			return ab, nil
		}
		todo = again
	}
	return nil, nil
}

// met notes prepared timestamp pw, found on key k, for settling once the
// transaction has aborted (abort).
func (tx *Tx) met(pw uint64, k *pkey) { tx.help = append(tx.help, help{k, pw}) }

// readAddr is the pending version's address a write validation chain
// read back (0 when the chain stopped before).
func readAddr(ch *chain) uint64 { return binary.NativeEndian.Uint64(ch.buf[offAlloc:]) }

// decide writes the commit verdict into the client id's record, and in
// the same list installs the writes on the record's node, each install
// CONDITIONAL on the request before it (one round trip). won is false
// when a client that found the transaction past its lease wrote the
// abort first (then nothing was installed). rest are the writes left to
// install: those on other nodes, and any the list did not reach (an
// install before it found C ≥ ts: a resolver rolled that key forward).
func (tx *Tx) decide(ctx context.Context, id *clientID, ts uint64, keys []*pkey) (rest []*pkey, won bool, err error) {
	c := tx.db.conns[int(id.id)%len(tx.db.conns)]
	ch, err := c.acquire(ctx, listCap)
	if err != nil {
		return nil, false, err
	}
	decide(ch, id.id, ts, verdictCommit)
	ch.wrs = ch.wrs[:listCap]
	var local []*pkey
	for _, k := range keys {
		if k.w == nil {
			continue
		}
		if k.c != c || len(local) == listCap-1 {
			rest = append(rest, k)
			continue
		}
		installAt(ch, 1+len(local), offItem+32*len(local), c.lay.slot(k.ki.slot), ts, verbs.FlagConditional)
		local = append(local, k)
	}
	ch.wrs = ch.wrs[:1+len(local)]
	if _, err := ch.run(ctx); err != nil {
		return nil, false, err
	}
	tx.rounds++
	defer ch.release()
	if ch.word(0) >= ts {
		return nil, false, nil
	}
	for i, k := range local {
		res := ch.buf[offItem+32*i:]
		switch old := binary.NativeEndian.Uint64(res[8*wC:]); {
		case old == all:
			rest = append(rest, k) // not reached
		case old < ts:
			k.c.giveBack(binary.NativeEndian.Uint64(res[8*wPtr:]))
			fallthrough
		default:
			k.ki.c.Store(ts)
		}
	}
	return rest, true, nil
}

// install installs the writes ws the decision's list did not (one round
// trip) and gives back the versions replaced; it reports whether every
// install answered (else the client id is burned: clients roll the rest
// forward after the lease). It may run after Commit returned: it touches
// nothing of tx but ws.
func (tx *Tx) install(ctx context.Context, ws []*pkey, ts uint64) bool {
	if len(ws) == 0 {
		return true
	}
	build := func(k *pkey, ch *chain) { install(ch, k.c.lay.slot(k.ki.slot), ts) }
	take := func(k *pkey, ch *chain) {
		if ch.word(wC) < ts {
			k.c.giveBack(ch.word(wPtr))
		}
		k.ki.c.Store(ts)
	}
	if hooked() && len(ws) > 1 {
		if err := tx.db.phase(ctx, ws[:1], build, take); err != nil {
			return false
		}
		hook(hookInstalling, tx.db)
		ws = ws[1:]
	}
	return tx.db.phase(ctx, ws, build, take) == nil
}

// abort ends a transaction that will not commit: for each key whose PW
// it raised, C = ts if C < ts (one round trip), and its pending version
// goes back to the node; then it resolves the expired prepared
// timestamps it met.
func (tx *Tx) abort(ctx context.Context, id *clientID, keys []*pkey, ts uint64, ab *txn.AbortError, err error) error {
	var locked []*pkey
	for _, k := range keys {
		if k.locked {
			locked = append(locked, k)
		}
	}
	clean := err == nil
	e := tx.db.phase(ctx, locked, func(k *pkey, ch *chain) { raiseC(ch, k.c.lay.slot(k.ki.slot), ts) },
		func(k *pkey, _ *chain) { k.c.giveBack(k.pend) })
	if e != nil {
		clean = false
	}
	tx.db.putID(id, clean)
	for _, h := range tx.help {
		// A prepared writer blocked this transaction: roll it forward if
		// it committed (its owner may be installing in the background),
		// resolve it if its lease ran out, so that the next attempt finds
		// the key free.
		rolled, e := tx.db.rollIfCommitted(ctx, h.k.c, h.k.ki, h.p, &tx.rounds)
		if e == nil && !rolled && expired(h.p, time.Now(), tx.db.cfg.Lease) {
			e = tx.db.resolve(ctx, h.k.c, h.k.ki, h.p, &tx.rounds)
		}
		if e != nil {
			break
		}
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return tx.aborted(txn.Abort(txn.Timeout, nil, err))
		}
		return err
	}
	return tx.aborted(ab)
}

// aborted counts an abort and returns it.
func (tx *Tx) aborted(ab *txn.AbortError) error {
	tx.db.stats.aborts[ab.Reason].Add(1)
	return ab
}

// committed records the trace and counts the commit.
func (tx *Tx) committed(ts uint64) error {
	for k, r := range tx.reads {
		tx.tr.reads = append(tx.tr.reads, txn.Access{Key: k, Version: r.ver, Deleted: r.absent})
	}
	for _, k := range tx.order {
		tx.tr.writes = append(tx.tr.writes, txn.Access{Key: k, Version: ts, Deleted: tx.writes[k].del})
	}
	tx.db.stats.commits.Add(1)
	tx.db.stats.rounds.Add(uint64(tx.rounds))
	return nil
}
