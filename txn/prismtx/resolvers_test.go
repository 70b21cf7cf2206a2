package prismtx_test

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// TestRacingResolvers: six clients transfer between eight accounts with
// a lease of 200 µs, shorter than a commit: resolvers abort and roll
// forward transactions whose owners are alive and still running — chains
// of theirs arrive after their timestamp was resolved and the key taken
// by another writer (the pending version's CAS must not replace that
// writer's). No transfer is half-applied, no version freed while
// reachable; both installation modes.
func TestRacingResolvers(t *testing.T) {
	for _, syncInstall := range []bool{false, true} {
		racingResolvers(t, syncInstall)
	}
}

func racingResolvers(t *testing.T, syncInstall bool) {
	b := newBed(t, 3)
	var dbs []*prismtx.DB
	for range 6 {
		c := b.config()
		c.Lease = 200 * time.Microsecond
		c.SyncInstall = syncInstall
		dbs = append(dbs, b.dial(c))
	}
	const accounts, initial = 8, 1000
	ctx := tctx(t)
	fund(t, ctx, dbs[0], accounts, initial)
	transfers(t, ctx, dbs, accounts, 300, func(int) uint64 { return 1 })
	if sum := total(t, dbs[0], accounts); sum != accounts*initial {
		t.Fatalf("sync install %v: total %d, want %d", syncInstall, sum, accounts*initial)
	}
	var r uint64
	for _, db := range dbs {
		r += db.Stats().Resolved
	}
	t.Logf("sync install %v: %d prepared timestamps resolved", syncInstall, r)
}
