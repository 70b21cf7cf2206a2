package ford_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// TestNodeGone: with a memory node closed, transactions that reach it
// fail with ErrUnreachable within a bound instead of hanging, and Close
// still returns.
func TestNodeGone(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	db := b.db()
	ctx := tctx(t)
	keys := make([][]byte, 30)
	for i := range keys {
		keys[i] = acct(i)
		if err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(keys[i], []byte("1")) }); err != nil {
			t.Fatal(err)
		}
	}
	b.servers[1].Close()
	start := time.Now()
	failed := 0
	for _, k := range keys {
		err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(k, []byte("2")) })
		if err != nil {
			if !errors.Is(err, txn.ErrUnreachable) {
				t.Fatalf("%s: %v, want ErrUnreachable", k, err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no transaction noticed the node gone")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("30 transactions took %v with a node gone", d)
	}
	// The failed lock rounds released the copies they took on live
	// nodes, not left them to the lease: shard 0's primaries (node 0,
	// whose backup was node 1) validate unlocked at once.
	var shard0 [][]byte
	for _, k := range keys {
		if txn.Shard(k, 3) == 0 {
			shard0 = append(shard0, k)
		}
	}
	tx, _ := db.Begin(ctx)
	for _, k := range shard0 {
		if _, err := tx.Get(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); len(shard0) > 1 && err != nil {
		t.Fatalf("reading %d records of shard 0: %v", len(shard0), err)
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs with a node gone")
	}
	t.Logf("%d of 30 failed in %v", failed, time.Since(start).Round(time.Millisecond))
}

// TestLogNodeGone: a coordinator whose log node is gone fails its commit
// at once with ErrUnreachable (the outcome unknown: only whoever reads
// the log may decide), without waiting out its lease.
func TestLogNodeGone(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	db := b.db()
	ctx := tctx(t)
	tx, _ := db.Begin(ctx)
	logNode := ford.CoordID(tx.(*ford.Tx)) / smallLayout.Coordinators
	var key []byte
	for i := 0; key == nil; i++ { // a key whose copies are both off the log node
		if k := acct(i); txn.Shard(k, 3) == (logNode+1)%3 {
			key = k
		}
	}
	if err := tx.Put(key, []byte("1")); err != nil {
		t.Fatal(err)
	}
	b.servers[logNode].Close()
	start := time.Now()
	if err := tx.Commit(); !errors.Is(err, txn.ErrUnreachable) {
		t.Fatalf("commit with the log node gone: %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("the commit took %v to fail", d)
	}
}

// TestCorruptSlot: a slot whose bytes fail their checksum for good (a
// hostile or broken node) is ErrCorrupt, not an abort to retry forever;
// the other copy still serves reads from it.
func TestCorruptSlot(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	db := b.db()
	ctx := tctx(t)
	key := []byte("victim")
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(key, []byte("value")) }); err != nil {
		t.Fatal(err)
	}
	primary := txn.Shard(key, 3)
	if err := ford.CorruptSlot(db, key, primary); err != nil {
		t.Fatal(err)
	}
	err := txn.Run(ctx, db, func(tx txn.Tx) error { _, err := tx.Get(key); return err })
	if !errors.Is(err, ford.ErrCorrupt) || errors.Is(err, txn.ErrAborted) {
		t.Fatalf("read of a corrupt slot: %v, want ErrCorrupt", err)
	}
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(key, []byte("x")) }); !errors.Is(err, ford.ErrCorrupt) {
		t.Fatalf("lock of a corrupt slot: %v, want ErrCorrupt", err)
	}
	cfg := b.config()
	cfg.BackupReads = true
	backup := b.dbWith(cfg)
	var v []byte
	if err := txn.Run(ctx, backup, func(tx txn.Tx) (err error) { v, err = tx.Get(key); return err }); err != nil || string(v) != "value" {
		t.Fatalf("backup read: %q %v", v, err)
	}
}
