package ford

import "sync/atomic"

// Stats are a client's counters.
type Stats struct {
	Commits          uint64 // transactions committed (read-only ones included)
	ReadOnly         uint64 // of which read-only
	LockAborts       uint64 // aborted on a lock held by another transaction
	ValidationAborts uint64 // aborted because a record read changed
	OtherAborts      uint64 // aborted otherwise (lease, context, connection, user)
	// Lists counts post lists (doorbells); Rounds the rounds (round
	// trips: each a set of lists posted at once and waited for).
	Lists  uint64
	Rounds uint64
	// CommitRounds is the round trips of the read-write commits after
	// execution (validate, log, write-and-unlock), summed;
	// MaxCommitRounds the most one commit took.
	CommitRounds    uint64
	MaxCommitRounds uint64
	ReadWrite       uint64 // read-write commits (CommitRounds' count)
	// RolledForward and RolledBack count the transactions of others this
	// client recovered (forward: logged, roll its images in; back: not
	// logged, release its lock).
	RolledForward uint64
	RolledBack    uint64
}

// counters are Stats, live.
type counters struct {
	commits, readOnly, lockAborts, validAborts, others atomic.Uint64
	lists, rounds, commitRounds, maxCommitRounds       atomic.Uint64
	readWrite, forward, back                           atomic.Uint64
}

// Stats returns the client's counters.
func (db *DB) Stats() Stats {
	c := &db.stats
	return Stats{Commits: c.commits.Load(), ReadOnly: c.readOnly.Load(), LockAborts: c.lockAborts.Load(),
		ValidationAborts: c.validAborts.Load(), OtherAborts: c.others.Load(), Lists: c.lists.Load(),
		Rounds: c.rounds.Load(), CommitRounds: c.commitRounds.Load(), MaxCommitRounds: c.maxCommitRounds.Load(),
		ReadWrite: c.readWrite.Load(), RolledForward: c.forward.Load(), RolledBack: c.back.Load()}
}

// commitRounds records a read-write commit that took n rounds.
func (c *counters) commitRound(n uint64) {
	c.readWrite.Add(1)
	c.commitRounds.Add(n)
	for {
		m := c.maxCommitRounds.Load()
		if n <= m || c.maxCommitRounds.CompareAndSwap(m, n) {
			return
		}
	}
}
