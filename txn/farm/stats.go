package farm

import (
	"sync/atomic"
	"time"
)

// NodeStats are a node's counters.
type NodeStats struct {
	Locks         int           // transactions holding locks here now
	Pending       int           // transactions with COMMIT-BACKUP records not yet truncated
	Locked        uint64        // objects locked
	LockFailures  uint64        // LOCK requests refused (conflict, changed version, full)
	Installed     uint64        // transactions installed and unlocked (commits)
	Released      uint64        // transactions unlocked without installing (aborts)
	Records       uint64        // log records taken
	Wraps         uint64        // times a log ring's reader went round to its start
	BackupApplied uint64        // backup records applied to the backup copies
	BackupFull    uint64        // committed writes a backup copy had no slot for (should stay 0)
	Recovered     uint64        // transactions this node recovered, committed
	RecoverAborts uint64        // transactions this node recovered, aborted
	MaxLockHold   time.Duration // the longest any transaction held its locks here
	CPU           time.Duration // the node's CPU time on the protocol (RPC handlers, log records)
}

// Stats returns the node's counters.
func (n *Node) Stats() NodeStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.stats
	s.Locks, s.Pending = len(n.locks), len(n.pending)
	s.CPU = time.Duration(n.cpu.Load())
	return s
}

// OldestLock is the age of the oldest lock held at the node now (0 when
// none is).
func (n *Node) OldestLock() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	var d time.Duration
	for _, r := range n.locks {
		d = max(d, time.Since(r.at))
	}
	return d
}

// counters are a client's, updated atomically.
type counters struct {
	reads, logWrites, rpcs          atomic.Uint64
	ringWaits                       atomic.Uint64
	commits, readOnly               atomic.Uint64
	lockAborts, validAborts, others atomic.Uint64
	unknown                         atomic.Uint64
}

// Stats are a client's counters since Dial: its transactions' outcomes
// and the round trips they took, by kind, for the experiments' round
// trips per committed transaction.
type Stats struct {
	Commits          uint64 // transactions committed (read-only ones included)
	ReadOnly         uint64 // of which read-only
	LockAborts       uint64 // aborted at LOCK (a lock held, a version changed)
	ValidationAborts uint64 // aborted at VALIDATE
	OtherAborts      uint64 // aborted otherwise (timeouts, connections)
	Unknown          uint64 // Commit returned ErrUnreachable after COMMIT-BACKUP began: recovery decides
	Reads            uint64 // one-sided READ lists (each one round trip to one node)
	LogWrites        uint64 // one-sided WRITE lists into log rings (each one round trip)
	RPCs             uint64 // LOCK calls (each one round trip)
	RingWaits        uint64 // READs of a full log ring's consumed position (counted in Reads too)
}

// RoundTrips is Reads + LogWrites + RPCs.
func (s Stats) RoundTrips() uint64 { return s.Reads + s.LogWrites + s.RPCs }

// Stats returns the client's counters.
func (db *DB) Stats() Stats {
	c := &db.stats
	return Stats{Commits: c.commits.Load(), ReadOnly: c.readOnly.Load(), LockAborts: c.lockAborts.Load(),
		ValidationAborts: c.validAborts.Load(), OtherAborts: c.others.Load(), Unknown: c.unknown.Load(),
		Reads: c.reads.Load(), LogWrites: c.logWrites.Load(), RPCs: c.rpcs.Load(), RingWaits: c.ringWaits.Load()}
}
