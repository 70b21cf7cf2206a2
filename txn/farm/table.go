package farm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/rdmakit/rdmakit/txn"
)

// The node's CPU side of the tables: lookups, LOCK, installation and
// release of a primary's locks, and a backup's application of committed
// writes. Everything here runs under n.mu; the CPU is the only writer of
// the tables, so it reads them without the torn-read checks clients need.

// lockRec is a transaction's locks at this node, by shard (a node is
// primary of several shards once it took over a lost primary's).
type lockRec struct {
	info   txInfo
	epoch  uint64 // the epoch of the session that locked
	shards map[int]*lockedShard
	at     time.Time
	sess   *session
}

// lockedShard is a transaction's locks in one shard: the slots it
// locked, the versions they had, and the writes to install.
type lockedShard struct {
	copy     int // the copy of the shard the node serves as primary
	slots    []int
	versions []uint64
	writes   []write // copies, not aliases of a request
}

// backupRec is a transaction's COMMIT-BACKUP records at this node, by
// shard, kept until truncated or decided.
type backupRec struct {
	info   txInfo
	epoch  uint64 // the epoch of the session the records came through
	shards map[int][]write
	sess   *session
	at     time.Time
}

// slot returns slot i of copy c.
func (n *Node) slot(c, i int) []byte {
	off := (c*n.layout.Buckets + i) * n.slotSize
	return n.tables.Bytes()[off : off+n.slotSize]
}

// find returns key's slot in copy c (found), or the empty slot where it
// would go (not found), or -1 when its window is full of other keys.
func (n *Node) find(c int, key []byte) (int, bool) {
	home := n.layout.home(txn.Hash(key))
	for i := home; i < home+MaxProbe; i++ {
		b := n.slot(c, i)
		kl := int(b[slotMeta])
		if kl == 0 {
			return i, false
		}
		if bytes.Equal(b[slotKey:slotKey+kl], key) {
			return i, true
		}
	}
	return -1, false
}

// copyWrites copies ws out of a request or ring buffer.
func copyWrites(ws []write) []write {
	out := make([]write, len(ws))
	for i, w := range ws {
		w.key, w.value = bytes.Clone(w.key), bytes.Clone(w.value)
		out[i] = w
	}
	return out
}

// lock is MethodLock for session s: lock every write's object in the
// primary copy, checking the versions read; all or none.
func (n *Node) lock(s *session, req, resp []byte) (int, error) {
	t0 := time.Now()
	defer n.busy(t0)
	if len(req) < lockFixed {
		return 0, fmt.Errorf("%w: a %d-byte lock", ErrProtocol, len(req))
	}
	seq, shard := binary.LittleEndian.Uint64(req), int(req[8])
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.layout == nil {
		return 0, ErrNoLayout
	}
	info, rest, err := parseTxInfo(req[lockFixed:], n.layout.Shards())
	if err != nil {
		return 0, err
	}
	ws, _, err := parseWrites(rest, n.layout.ValueSize)
	if err != nil {
		return 0, err
	}
	k := txKey{s.client, seq}
	switch {
	case s.ring == nil:
		return 0, fmt.Errorf("%w: lock from a client not open", ErrProtocol)
	case s.fenced:
		return 0, ErrFenced
	case shard >= len(n.conf.Primaries) || n.conf.Primaries[shard] != n.index:
		return 0, fmt.Errorf("%w: lock of shard %d at node %d, not its primary at epoch %d", ErrEpoch, shard, n.index, n.conf.Epoch)
	case n.locks[k] != nil && (n.locks[k].shards[shard] != nil || n.locks[k].sess != s):
		return 0, fmt.Errorf("%w: transaction %d locked twice", ErrProtocol, seq)
	case 1+8*len(ws) > len(resp):
		return 0, fmt.Errorf("%w: %d writes", ErrProtocol, len(ws))
	}
	p := &lockedShard{copy: n.layout.copyOf(n.index, shard)}
	for i := range ws {
		w := &ws[i]
		st, slot, word := n.lockOne(p.copy, w)
		if st != lockOK {
			n.releaseShard(p)
			n.stats.Released++
			resp[0] = st
			binary.LittleEndian.PutUint16(resp[1:], uint16(i))
			n.stats.LockFailures++
			return 3, nil
		}
		p.slots, p.versions = append(p.slots, slot), append(p.versions, word)
		binary.LittleEndian.PutUint64(resp[1+8*i:], word)
	}
	p.writes = copyWrites(ws)
	r := n.locks[k]
	if r == nil {
		r = &lockRec{info: info, epoch: s.epoch, shards: map[int]*lockedShard{}, at: t0, sess: s}
		n.locks[k] = r
	}
	r.shards[shard] = p
	n.stats.Locked += uint64(len(ws))
	resp[0] = lockOK
	return 1 + 8*len(ws), nil
}

// lockOne locks w's object in copy c: the slot and the version it had.
func (n *Node) lockOne(c int, w *write) (st byte, slot int, word uint64) {
	slot, found := n.find(c, w.key)
	if slot < 0 {
		return lockFull, 0, 0
	}
	b := n.slot(c, slot)
	word = loadWord(b)
	switch {
	case word&lockBit != 0:
		return lockLocked, 0, 0
	case w.expect && word != w.version:
		return lockChanged, 0, 0
	case !found: // claim the slot, absent, locked
		writeSlot(b, w.key, false, nil, 0, false)
	default:
		storeWord(b, word|lockBit)
	}
	return lockOK, slot, word
}

// release unlocks r's objects as they were (an abort).
func (n *Node) release(r *lockRec) {
	for _, p := range r.shards {
		n.releaseShard(p)
	}
	n.held(r)
	n.stats.Released++
}

// install writes r's values at their new versions and unlocks (a
// commit).
func (n *Node) install(r *lockRec) {
	for _, p := range r.shards {
		n.installShard(p)
	}
	n.held(r)
	n.stats.Installed++
}

// releaseShard unlocks p's objects as they were.
func (n *Node) releaseShard(p *lockedShard) {
	for i, slot := range p.slots {
		storeWord(n.slot(p.copy, slot), p.versions[i])
	}
}

// installShard writes p's values at their new versions and unlocks.
func (n *Node) installShard(p *lockedShard) {
	for i, slot := range p.slots {
		w := &p.writes[i]
		writeSlot(n.slot(p.copy, slot), w.key, w.op == opPut, w.value, p.versions[i]+1, true)
	}
}

// settle installs (commit) or releases one shard's locks of transaction
// k, on its COMMIT-PRIMARY or abort record; the transaction's record goes
// with its last shard.
func (n *Node) settle(k txKey, shard int, commit bool) {
	l := n.locks[k]
	if l == nil || l.shards[shard] == nil {
		return
	}
	if commit {
		n.installShard(l.shards[shard])
	} else {
		n.releaseShard(l.shards[shard])
	}
	delete(l.shards, shard)
	if len(l.shards) > 0 {
		return
	}
	n.held(l)
	if commit {
		n.stats.Installed++
	} else {
		n.stats.Released++
	}
	delete(n.locks, k)
}

// held notes how long r's locks were held.
func (n *Node) held(r *lockRec) {
	if d := time.Since(r.at); d > n.stats.MaxLockHold {
		n.stats.MaxLockHold = d
	}
}

// applyBackup installs a committed transaction's writes to shard in this
// node's backup copy, each only over an older version (records of
// different coordinators may be applied in any order). Records this node
// took as the shard's primary (its decision log, epoch's configuration
// leaving the shard no backup) are not applied: the primary installs
// its locked writes itself.
func (n *Node) applyBackup(epoch uint64, shard int, ws []write) {
	c := n.layout.copyOf(n.index, shard)
	if c < 1 {
		return
	}
	if conf, ok := n.confs[epoch]; ok && conf.Primaries[shard] == n.index {
		return
	}
	for i := range ws {
		w := &ws[i]
		slot, found := n.find(c, w.key)
		if slot < 0 {
			n.stats.BackupFull++
			n.log.Error("farm: backup copy has no slot for a committed key", "shard", shard, "key", w.key)
			continue
		}
		b := n.slot(c, slot)
		if found && loadWord(b) >= w.version {
			continue
		}
		writeSlot(b, w.key, w.op == opPut, w.value, w.version, true)
	}
	n.stats.BackupApplied++
}

// commitBackup applies and forgets a transaction's backup records, and
// remembers that it committed.
func (n *Node) commitBackup(k txKey) {
	if r := n.pending[k]; r != nil {
		for s, ws := range r.shards {
			n.applyBackup(r.epoch, s, ws)
		}
		delete(n.pending, k)
	}
	n.applied.add(k)
}

// take applies one record of session s's ring.
func (n *Node) take(s *session, r *record) {
	for _, t := range r.trunc {
		n.commitBackup(txKey{s.client, t})
	}
	k := txKey{s.client, r.seq}
	switch r.kind {
	case recAbort:
		n.settle(k, r.shard, false)
	case recCommitPrimary:
		n.settle(k, r.shard, true)
	case recCommitBackup:
		if conf := n.confs[s.epoch]; !slices.Contains(logHolders(&conf, r.shard), n.index) {
			n.log.Warn("farm: COMMIT-BACKUP record for a shard this node does not log", "shard", r.shard, "epoch", s.epoch)
			return
		}
		b := n.pending[k]
		if b == nil {
			b = &backupRec{info: r.info, epoch: s.epoch, shards: map[int][]write{}, sess: s, at: time.Now()}
			n.pending[k] = b
		}
		b.shards[r.shard] = copyWrites(r.writes)
	}
}

// takeRecords takes every record that has landed in s's ring and tells
// the writer; it returns how many.
func (n *Node) takeRecords(s *session) int {
	if s.ring == nil || s.fenced || n.layout == nil {
		return 0
	}
	k := 0
	lap := s.ring.pos / uint64(s.ring.size)
	defer func() { n.stats.Wraps += s.ring.pos/uint64(s.ring.size) - lap }()
	for {
		body, ok := s.ring.next()
		if !ok {
			break
		}
		k++
		r, err := parseRecord(body, n.layout.Shards(), n.layout.ValueSize)
		if err != nil {
			// A client that writes what does not decode is faulty: its
			// connection ends here (its transactions are recovered), and
			// nothing after it is taken.
			n.log.Error("farm: bad log record; fencing the client's connection", "client", s.client, "err", err)
			if s.qp != nil {
				_ = s.qp.Modify(verbsError)
			}
			s.fenced = true
			break
		}
		n.take(s, &r)
	}
	if k > 0 {
		s.ring.done()
		n.stats.Records += uint64(k)
	}
	return k
}

// stopSession fences session s: its QP goes to ERROR, so nothing more
// of its client's lands; the node waits out what is landing, takes the
// records that landed, and takes none after.
func (n *Node) stopSession(s *session) {
	if s.fenced {
		return
	}
	if s.qp != nil {
		_ = s.qp.Modify(verbsError)
	}
	if s.ringMR != nil {
		quiesce(s.ringMR)
	}
	n.takeRecords(s)
	s.fenced = true
}

// unresolved lists the transactions that hold locks here through
// session s.
func (n *Node) unresolved(s *session) []txKey {
	var out []txKey
	for k, r := range n.locks {
		if r.sess == s {
			out = append(out, k)
		}
	}
	return out
}
