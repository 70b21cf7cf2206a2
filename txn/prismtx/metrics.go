package prismtx

import (
	"sync/atomic"

	"github.com/rdmakit/rdmakit/txn"
)

// counters are a DB's running totals (Stats reads them).
type counters struct {
	commits    atomic.Uint64
	aborts     [txn.UserAbort + 1]atomic.Uint64
	rounds     atomic.Uint64 // round trips of committed transactions (execute, prepare, decide, install)
	resolved   atomic.Uint64
	burned     atomic.Uint64
	background atomic.Uint64
}

// Stats are a DB's counters since Dial: what the experiments report.
type Stats struct {
	// Commits counts committed transactions; Aborts aborted ones by
	// reason (index txn.Reason).
	Commits uint64
	Aborts  [txn.UserAbort + 1]uint64
	// RoundTrips counts the round trips committed transactions waited
	// for: each step that waits for the nodes (a GET, a slot lookup,
	// prepare, the decision, installation with Config.SyncInstall) is
	// one, whatever the number of nodes its lists go to in parallel.
	// RoundTrips/Commits is the round trips per committed transaction.
	RoundTrips uint64
	// Background counts the installations run after their Commit
	// returned (one round trip each, that no caller waited for).
	Background uint64
	// Lists counts the request lists posted (every transaction, and the
	// returns of replaced versions).
	Lists uint64
	// Resolved counts prepared timestamps of other clients this DB
	// resolved after their lease (aborted or rolled forward).
	Resolved uint64
	// Burned counts client ids given up because a transaction of theirs
	// ended unresolved (a connection failed mid-commit).
	Burned uint64
}

// Stats returns the DB's counters.
func (db *DB) Stats() Stats {
	s := Stats{Commits: db.stats.commits.Load(), RoundTrips: db.stats.rounds.Load(),
		Resolved: db.stats.resolved.Load(), Burned: db.stats.burned.Load(), Background: db.stats.background.Load()}
	for i := range s.Aborts {
		s.Aborts[i] = db.stats.aborts[i].Load()
	}
	for _, c := range db.conns {
		s.Lists += c.lists.Load()
	}
	return s
}
