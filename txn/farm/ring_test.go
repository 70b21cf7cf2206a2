package farm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// TestSmallRings runs transfers through log rings of 4 KiB: every ring
// wraps many times (skip records at the ends of laps), and coordinators
// that find theirs full wait for the node to consume it. The money adds
// up, the copies agree and the history is serializable.
func TestSmallRings(t *testing.T) {
	const msg = 1 << 10
	b := newBedWith(t, 3, farm.NodeConfig{MaxMessage: msg, LogSize: 4 * msg, MaxClients: 8})
	k := &bank{t: t, b: b, h: check.NewHistory(), accounts: 16}
	cfg := b.config()
	cfg.MaxMessage = msg
	loader := b.dbWith(cfg)
	k.load(loader)
	ctx, stop := context.WithTimeout(tctx(t), 5*time.Second)
	defer stop()
	go func() { // run until the rings went round often enough
		for ctx.Err() == nil && wrapsOf(b) < 20 {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
	}()
	var wg sync.WaitGroup
	var workers []*farm.DB
	for w := range 3 {
		cfg := b.config()
		cfg.MaxMessage = msg
		db := b.dbWith(cfg)
		workers = append(workers, db)
		wg.Go(func() { k.work(ctx, db, uint64(w)) })
	}
	wg.Wait()
	for _, db := range workers {
		db.Close()
	}
	if got, want := k.total(loader), initial*k.accounts; got != want {
		t.Fatalf("money: %d, want %d", got, want)
	}
	k.waitSettled(farm.DefaultLease)
	k.sameCopies()
	if err := k.h.Check(); err != nil {
		t.Fatal(err)
	}
	var records, waits uint64
	for _, n := range b.nodes {
		records += n.Stats().Records
	}
	wraps := wrapsOf(b)
	for _, db := range workers {
		waits += db.Stats().RingWaits
	}
	if wraps < 10 {
		t.Fatalf("%d records, %d wraps: the rings barely wrapped", records, wraps)
	}
	t.Logf("%d commits, %d records, %d wraps, %d waits for a full ring", k.commits.Load(), records, wraps, waits)
}

// wrapsOf is how often the nodes' ring readers went round.
func wrapsOf(b *bed) uint64 {
	var w uint64
	for _, n := range b.nodes {
		w += n.Stats().Wraps
	}
	return w
}
