package farm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/rdmakit/rdmakit/txn"
)

// commitTimeout bounds a commit's steps after LOCK: they no longer
// follow the transaction's context, since leaving locks behind costs
// everyone a lease.
const commitTimeout = 5 * time.Second

// errStopped is the error of a commit that a test hook stopped: the
// coordinator is taken to have died there.
var errStopped = errors.New("farm: coordinator stopped (test hook)")

// shardWrites are a transaction's writes to one shard, sorted by key.
type shardWrites struct {
	shard int
	keys  []string
	ws    []write
}

// Commit implements txn.Tx: LOCK, VALIDATE, COMMIT-BACKUP,
// COMMIT-PRIMARY; truncation follows in later records.
func (t *Tx) Commit() error {
	if t.done {
		return txn.ErrDone
	}
	t.done = true
	db := t.db
	if db.closed.Load() {
		return txn.ErrClosed
	}
	if len(t.writes) == 0 {
		return t.commitReadOnly()
	}
	seq := db.seq.Add(1)
	t.seq = seq
	groups := t.group()
	parts := make([]int, len(groups))
	for i, g := range groups {
		parts[i] = g.shard
	}
	if err := t.pin(parts); err != nil {
		return t.count(err)
	}
	if err := t.lockAll(seq, parts, groups); err != nil {
		return t.count(err)
	}
	if !t.step(StepLocked) {
		return errStopped
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), commitTimeout)
	defer cancel()
	if !db.cfg.SkipValidation {
		if err := t.validate(ctx); err != nil {
			t.abortAll(seq, parts)
			return t.count(err)
		}
	}
	if !t.step(StepValidated) {
		return errStopped
	}
	if err := t.commitBackups(ctx, seq, parts, groups); err != nil {
		return t.count(err)
	}
	if !t.step(StepBackedUp) {
		return errStopped
	}
	if err := t.commitPrimaries(ctx, seq, parts); err != nil {
		return t.count(err)
	}
	t.traced = true
	db.stats.commits.Add(1)
	return nil
}

// pin takes the connections the commit will use, one per node holding a
// copy of a written shard, and notes their sessions in the transaction's
// txInfo: every record of the transaction goes through them, so they
// are what recovery fences. A node without a connection now aborts the
// transaction; so does a pinned connection that fails its probe (when
// another connection of the client failed since it was last known
// good, it is probed first: a recovery fences several at once, and a
// commit that finds out at COMMIT-BACKUP leaves its outcome in doubt).
func (t *Tx) pin(parts []int) error {
	n := t.db.layout.Shards()
	t.conns, t.info = make([]*conn, n), txInfo{parts: parts, sids: make([]uint32, n)}
	for _, p := range parts {
		for _, r := range append([]int{t.conf.Primaries[p]}, logHolders(t.conf, p)...) {
			c, err := t.connAt(r)
			if err != nil {
				return txn.Abort(txn.Timeout, nil, err)
			}
			t.conns[r], t.info.sids[r] = c, c.sid
		}
	}
	errs := make(chan error, n)
	probing := 0
	for _, c := range t.conns {
		if c != nil && c.checked.Load() < t.db.failed.Load() {
			probing++
			go func() { errs <- c.probe(t.ctx) }()
		}
	}
	var first error
	for range probing {
		if err := <-errs; err != nil && first == nil {
			first = txn.Abort(txn.Timeout, nil, err)
		}
	}
	return first
}

// connTo is the pinned connection to node i.
func (t *Tx) connTo(i int) (*conn, error) {
	if c := t.conns[i]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: node %d not pinned", ErrProtocol, i)
}

// step runs the test hook at step s: false means stop.
func (t *Tx) step(s Step) bool { return t.db.hook == nil || t.db.hook(s) }

// count counts a failed commit by its kind and returns err.
func (t *Tx) count(err error) error {
	c := &t.db.stats
	switch {
	case errors.Is(err, errStopped):
	case txn.ReasonOf(err) == txn.LockConflict:
		c.lockAborts.Add(1)
	case txn.ReasonOf(err) == txn.ValidationFailed:
		c.validAborts.Add(1)
	case errors.Is(err, txn.ErrAborted):
		c.others.Add(1)
	case errors.Is(err, txn.ErrUnreachable):
		c.unknown.Add(1)
	}
	return err
}

// commitReadOnly validates a read-only transaction's reads: none is
// needed for at most one read, which is atomic by itself.
func (t *Tx) commitReadOnly() error {
	if len(t.reads) > 1 && !t.db.cfg.SkipValidation {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), commitTimeout)
		defer cancel()
		if err := t.validate(ctx); err != nil {
			return t.count(err)
		}
	}
	t.traced = true
	t.db.stats.commits.Add(1)
	t.db.stats.readOnly.Add(1)
	return nil
}

// group sorts the writes by shard and key, with the versions read.
func (t *Tx) group() []shardWrites {
	keys := make([]string, 0, len(t.writes))
	for k := range t.writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	by := map[int]*shardWrites{}
	var out []shardWrites
	for _, k := range keys {
		s := txn.Shard([]byte(k), t.db.layout.Shards())
		g := by[s]
		if g == nil {
			g = &shardWrites{shard: s}
			by[s] = g
		}
		w := t.writes[k]
		wr := write{op: w.op, key: []byte(k), value: w.value}
		if r := t.reads[k]; r != nil {
			wr.expect, wr.version = true, r.version
		}
		g.keys, g.ws = append(g.keys, k), append(g.ws, wr)
	}
	for _, g := range by {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b shardWrites) int { return a.shard - b.shard })
	return out
}

// lockAll sends LOCK to every written primary at once. When one fails,
// the others' locks are released (abort records) and the transaction
// aborts; on success the writes carry the versions they install.
func (t *Tx) lockAll(seq uint64, parts []int, groups []shardWrites) error {
	type result struct {
		st   byte
		vs   []uint64
		at   int
		err  error
		sent bool
	}
	res := make([]result, len(groups))
	done := make(chan int, len(groups))
	for i := range groups {
		g := &groups[i]
		req := binary.LittleEndian.AppendUint64(nil, seq)
		req = append(req, byte(g.shard))
		req = t.info.append(req)
		req = appendWrites(req, g.ws)
		c, err := t.connTo(t.conf.Primaries[g.shard])
		if err != nil {
			res[i].err = err
			done <- i
			continue
		}
		if len(req) > maxLockRequest(t.db.cfg.MaxMessage) {
			res[i].err = fmt.Errorf("%w: %d bytes of writes to shard %d", txn.ErrTooLarge, len(req), g.shard)
			done <- i
			continue
		}
		res[i].sent = true
		go func() {
			r := &res[i]
			r.st, r.vs, r.at, r.err = c.lock(t.ctx, req, len(g.ws))
			done <- i
		}()
	}
	for range groups {
		<-done
	}
	var fail error
	var locked []int
	for i := range groups {
		r, g := &res[i], &groups[i]
		switch {
		case r.err != nil && fail == nil:
			fail = r.err
		case r.err != nil:
		case r.st == lockOK:
			locked = append(locked, g.shard)
			for j, k := range g.keys {
				t.writes[k].version = r.vs[j] + 1
			}
		case fail == nil:
			fail = lockError(r.st, []byte(g.keys[r.at]))
		}
		if r.sent && r.err != nil {
			locked = append(locked, g.shard) // it may have locked: release it too
		}
	}
	if fail == nil {
		return nil
	}
	t.abortAll(seq, locked)
	if errors.Is(fail, txn.ErrAborted) || errors.Is(fail, txn.ErrFull) || errors.Is(fail, txn.ErrTooLarge) {
		return fail
	}
	// No COMMIT-BACKUP record exists: whatever recovery finds, it aborts.
	return txn.Abort(txn.Timeout, nil, fail)
}

// maxLockRequest bounds a LOCK request for messages of maxMessage
// bytes, so that the shard's COMMIT-BACKUP record (the same writes,
// with truncations) fits a connection's slot and a quarter of a ring.
func maxLockRequest(maxMessage int) int { return maxMessage - 64 - recFixed - 8*MaxTruncations }

// lockError is the error of a refused LOCK.
func lockError(st byte, key []byte) error {
	switch st {
	case lockLocked:
		return txn.Abort(txn.LockConflict, key, nil)
	case lockChanged:
		return txn.Abort(txn.ValidationFailed, key, nil)
	case lockFull:
		return fmt.Errorf("%w: no slot for key %q in its shard's window", txn.ErrFull, key)
	}
	return fmt.Errorf("%w: lock status %d", ErrProtocol, st)
}

// abortAll writes abort records to the primaries of shards in the
// background: they release the transaction's locks. One that cannot be
// written leaves the locks to the lease.
func (t *Tx) abortAll(seq uint64, shards []int) {
	for _, s := range shards {
		c, err := t.connTo(t.conf.Primaries[s])
		if err != nil {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
			defer cancel()
			_ = c.appendRecord(ctx, &record{kind: recAbort, shard: s, seq: seq})
		}()
	}
}

// validate re-READs the words of the objects read and not written, one
// list per node: each must be unlocked at the version read (and an empty
// slot still empty).
func (t *Tx) validate(ctx context.Context) error {
	type check struct {
		key string
		r   *readEnt
	}
	by := map[int][]check{}
	for k, r := range t.reads {
		if _, w := t.writes[k]; w || r.slot < 0 {
			continue // LOCK checked it; or it can never exist
		}
		by[r.shard] = append(by[r.shard], check{k, r})
	}
	if len(by) == 0 {
		return nil
	}
	size := uint64(t.db.layout.SlotSize())
	errs := make(chan error, len(by))
	for _, cs := range by {
		go func() {
			c, err := t.connAt(cs[0].r.node)
			if err != nil {
				errs <- txn.Abort(txn.Timeout, nil, err)
				return
			}
			addrs := make([]uint64, len(cs))
			for i, ch := range cs {
				addrs[i] = ch.r.base + uint64(ch.r.slot)*size
			}
			buf, err := c.readWords(ctx, addrs, 16, nil)
			if err != nil {
				errs <- txn.Abort(txn.Timeout, nil, err)
				return
			}
			for i, ch := range cs {
				w := binary.LittleEndian.Uint64(buf[16*i:])
				if w != ch.r.version || (ch.r.empty && buf[16*i+slotMeta] != 0) {
					errs <- txn.Abort(txn.ValidationFailed, []byte(ch.key), nil)
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range by {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// commitBackups writes a COMMIT-BACKUP record of each written shard into
// the log of each of its backups and waits for the NICs' acks. From the
// first record on, the outcome is recovery's to decide if the
// coordinator fails: an error here is ErrUnreachable.
func (t *Tx) commitBackups(ctx context.Context, seq uint64, parts []int, groups []shardWrites) error {
	type job struct {
		node int
		rec  *record
	}
	var jobs []job
	for _, g := range groups {
		ws := slices.Clone(g.ws)
		for i := range ws {
			ws[i].version, ws[i].expect = t.writes[g.keys[i]].version, false
		}
		for _, b := range logHolders(t.conf, g.shard) {
			jobs = append(jobs, job{b, &record{kind: recCommitBackup, shard: g.shard, seq: seq, info: t.info, writes: ws}})
		}
	}
	run := func(j job) error {
		c, err := t.connTo(j.node)
		if err == nil {
			err = c.appendRecord(ctx, j.rec)
		}
		return err
	}
	var err error
	if t.db.hook != nil { // one at a time, so a test can stop between them
		for _, j := range jobs {
			if err = run(j); err != nil {
				break
			}
			if !t.step(StepBackup) {
				return errStopped
			}
		}
	} else {
		errs := make(chan error, len(jobs))
		for _, j := range jobs {
			go func() { errs <- run(j) }()
		}
		for range jobs {
			if e := <-errs; e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: COMMIT-BACKUP: the outcome is recovery's: %w", txn.ErrUnreachable, err)
	}
	return nil
}

// commitPrimaries writes a COMMIT-PRIMARY record into each written
// primary's log and returns once the first is acknowledged; when all
// are, the transaction's truncation is queued for its backups.
func (t *Tx) commitPrimaries(ctx context.Context, seq uint64, parts []int) error {
	run := func(s int) error {
		c, err := t.connTo(t.conf.Primaries[s])
		if err == nil {
			err = c.appendRecord(ctx, &record{kind: recCommitPrimary, shard: s, seq: seq})
		}
		return err
	}
	if t.db.hook != nil {
		for _, s := range parts {
			if err := run(s); err != nil {
				return fmt.Errorf("%w: COMMIT-PRIMARY: the outcome is recovery's: %w", txn.ErrUnreachable, err)
			}
			if !t.step(StepPrimary) {
				return errStopped
			}
		}
		if !t.step(StepCommitted) {
			return errStopped
		}
		t.truncate(seq, parts)
		return nil
	}
	// The records outlive Commit, which returns at the first ack: they
	// have a context of their own.
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	errs := make(chan error, len(parts))
	for _, s := range parts {
		go func() {
			c, err := t.connTo(t.conf.Primaries[s])
			if err == nil {
				err = c.appendRecord(bg, &record{kind: recCommitPrimary, shard: s, seq: seq})
			}
			errs <- err
		}()
	}
	first := make(chan error, 1)
	go func() {
		defer cancel()
		var last error
		acked := false
		for range parts {
			err := <-errs
			if err == nil && !acked {
				acked = true
				first <- nil
			}
			if err != nil {
				last = err
			}
		}
		if !acked {
			first <- last
		}
		t.truncate(seq, parts) // every backup holds the records: the transaction committed
	}()
	if err := <-first; err != nil {
		return fmt.Errorf("%w: COMMIT-PRIMARY: the outcome is recovery's: %w", txn.ErrUnreachable, err)
	}
	return nil
}

// truncate queues the truncation of transaction seq at the backups of
// the shards it wrote: later records (or the flusher) carry it.
func (t *Tx) truncate(seq uint64, parts []int) {
	for _, p := range parts {
		for _, b := range logHolders(t.conf, p) {
			if c, err := t.db.conn(b); err == nil && c.epoch == t.conf.Epoch {
				c.addTrunc(seq)
			}
		}
	}
}
