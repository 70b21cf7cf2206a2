package prismtx_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// TestBasics: reads see committed writes and the transaction's own;
// Insert, Delete and their errors; a committed transaction's trace.
func TestBasics(t *testing.T) {
	b := newBed(t, 3)
	db := b.dial(b.config())
	ctx := tctx(t)
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		for i := range 20 {
			if err := tx.Put([]byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("v%d", i))); err != nil {
				return err
			}
		}
		v, err := tx.Get([]byte("k3"))
		if err != nil || string(v) != "v3" {
			return fmt.Errorf("own write: %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := db.Begin(ctx)
	for i := range 20 {
		v, err := tx.Get([]byte(fmt.Sprintf("k%d", i)))
		if err != nil || string(v) != fmt.Sprintf("v%d", i) {
			t.Fatalf("k%d: %q, %v", i, v, err)
		}
	}
	if _, err := tx.Get([]byte("nope")); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("absent key: %v", err)
	}
	if err := tx.Insert([]byte("k1"), []byte("x")); !errors.Is(err, txn.ErrExists) {
		t.Fatalf("insert of an existing key: %v", err)
	}
	if err := tx.Delete([]byte("nope")); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("delete of an absent key: %v", err)
	}
	if err := tx.Delete([]byte("k2")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Insert([]byte("new"), bytes.Repeat([]byte("n"), 3000)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	reads, writes := tx.(txn.Traced).Trace()
	if len(reads) != 22 || len(writes) != 2 {
		t.Fatalf("trace: %d reads, %d writes; want 22 and 2", len(reads), len(writes))
	}
	for _, w := range writes {
		if w.Version == 0 || (w.Key == "k2") != w.Deleted {
			t.Fatalf("write %+v", w)
		}
	}
	tx, _ = db.Begin(ctx)
	if _, err := tx.Get([]byte("k2")); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if v, err := tx.Get([]byte("new")); err != nil || len(v) != 3000 {
		t.Fatalf("inserted key: %d bytes, %v", len(v), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, txn.ErrDone) {
		t.Fatalf("second commit: %v", err)
	}
}

// TestConflictAborts: a transaction whose read was overwritten before it
// committed aborts with validation-failed.
func TestConflictAborts(t *testing.T) {
	b := newBed(t, 3)
	db := b.dial(b.config())
	ctx := tctx(t)
	put(t, db, "x", 1)
	t1, _ := db.Begin(ctx)
	if _, err := t1.Get([]byte("x")); err != nil {
		t.Fatal(err)
	}
	put(t, db, "x", 2)
	t1.Put([]byte("y"), []byte("1"))
	err := t1.Commit()
	if txn.ReasonOf(err) != txn.ValidationFailed {
		t.Fatalf("commit after an overwritten read: %v", err)
	}
}

func put(t *testing.T, db txn.DB, key string, v uint64) {
	t.Helper()
	err := txn.Run(tctx(t), db, func(tx txn.Tx) error { return tx.Put([]byte(key), u64(v)) })
	if err != nil {
		t.Fatal(err)
	}
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func le(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// TestTransfers: concurrent transfers between accounts on three nodes,
// by four clients: the total never changes, in any snapshot read.
func TestTransfers(t *testing.T) {
	b := newBed(t, 3)
	const accounts, initial = 16, 1000
	var dbs []*prismtx.DB
	for range 4 {
		dbs = append(dbs, b.dial(b.config()))
	}
	ctx := tctx(t)
	fund(t, ctx, dbs[0], accounts, initial)
	transfers(t, ctx, dbs, accounts, 150, func(i int) uint64 { return uint64(i%5 + 1) })
	if sum := total(t, dbs[0], accounts); sum != accounts*initial {
		t.Fatalf("total %d, want %d", sum, accounts*initial)
	}
	st := dbs[0].Stats()
	t.Logf("client 0: %d commits, aborts %v, %.2f round trips per commit", st.Commits, st.Aborts, float64(st.RoundTrips)/float64(st.Commits))
}

// fund puts initial into accounts 0 to accounts-1, in one transaction.
func fund(t *testing.T, ctx context.Context, db txn.DB, accounts int, initial uint64) {
	t.Helper()
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		for i := range accounts {
			if err := tx.Put(acct(i), u64(initial)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// transfers has each of dbs move amount(i) between two accounts rounds
// times, concurrently, and waits; a failed transfer fails the test.
func transfers(t *testing.T, ctx context.Context, dbs []*prismtx.DB, accounts, rounds int, amount func(i int) uint64) {
	var wg sync.WaitGroup
	for ci, db := range dbs {
		wg.Go(func() {
			for i := range rounds {
				from, to := (ci*7+i*3)%accounts, (ci*5+i*11+1)%accounts
				if from == to {
					to = (to + 1) % accounts
				}
				if err := transfer(ctx, db, from, to, amount(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func acct(i int) []byte { return []byte(fmt.Sprintf("acct/%d", i)) }

// transfer moves amount from one account to another (read-modify-write).
func transfer(ctx context.Context, db txn.DB, from, to int, amount uint64) error {
	return tracedTransfer(ctx, db, from, to, amount, nil)
}

// tracedTransfer is transfer; h, when not nil, records the committed
// attempt's trace.
func tracedTransfer(ctx context.Context, db txn.DB, from, to int, amount uint64, h *check.History) error {
	return txn.Run(ctx, traced{db, h}, func(tx txn.Tx) error {
		a, err := tx.Get(acct(from))
		if err != nil {
			return err
		}
		b, err := tx.Get(acct(to))
		if err != nil {
			return err
		}
		if err := tx.Put(acct(from), u64(binary.LittleEndian.Uint64(a)-amount)); err != nil {
			return err
		}
		return tx.Put(acct(to), u64(binary.LittleEndian.Uint64(b)+amount))
	})
}

// total reads every account in one transaction.
func total(t *testing.T, db txn.DB, accounts int) uint64 {
	t.Helper()
	var sum uint64
	err := txn.Run(tctx(t), db, func(tx txn.Tx) error {
		sum = 0
		for i := range accounts {
			v, err := tx.Get(acct(i))
			if err != nil {
				return err
			}
			sum += binary.LittleEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestFewSlots: transactions of eight keys, from 8 goroutines, on
// connections of 4 slots: a phase runs in batches, and transactions
// waiting for slots never wait for each other.
func TestFewSlots(t *testing.T) {
	b := newBed(t, 3)
	cfg := b.config()
	cfg.Slots = 4
	db := b.dial(cfg)
	ctx := tctx(t)
	const keys, goroutines = 96, 8
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				err := txn.Run(ctx, db, func(tx txn.Tx) error {
					for j := range 8 {
						k := []byte(fmt.Sprintf("few/%d", (g*12+i*7+j)%keys))
						v, err := tx.Get(k)
						if err != nil && err != txn.ErrNotFound {
							return err
						}
						if err := tx.Put(k, append(v, 'x')); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var n int
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		n = 0
		for j := range keys {
			v, err := tx.Get([]byte(fmt.Sprintf("few/%d", j)))
			if err != nil && err != txn.ErrNotFound {
				return err
			}
			n += len(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != goroutines*10*8 {
		t.Fatalf("%d increments survived, want %d", n, goroutines*10*8)
	}
}

// traced is a DB whose committed transactions' traces go to h (when not
// nil).
type traced struct {
	txn.DB
	h *check.History
}

func (d traced) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil || d.h == nil {
		return tx, err
	}
	return tracedTx{tx, d.h}, nil
}

type tracedTx struct {
	txn.Tx
	h *check.History
}

func (t tracedTx) Commit() error {
	err := t.Tx.Commit()
	if err == nil {
		t.h.Add(t.Tx.(txn.Traced).Trace())
	}
	return err
}

// TestRecycling: clients overwrite keys with 1,000-byte values for four
// times the nodes' version memory: the replaced versions go back through
// the return rings and the nodes recycle them.
func TestRecycling(t *testing.T) {
	const memory = 1 << 20
	b := newBedWith(t, 3, prismtx.NodeConfig{Slots: 1024, Memory: memory, Stock: 64 << 10})
	db := b.dial(b.config())
	ctx := tctx(t)
	value := make([]byte, 1000)
	for i := range 4 * 3 * memory / 2048 {
		err := txn.Run(ctx, db, func(tx txn.Tx) error {
			value[0] = byte(i)
			return tx.Put([]byte(fmt.Sprintf("big/%d", i%16)), value)
		})
		if err != nil {
			t.Fatalf("overwrite %d: %v", i, err)
		}
	}
	var recycled uint64
	for _, n := range b.nodes {
		recycled += n.Stats().Recycled
	}
	if recycled == 0 {
		t.Fatal("the nodes recycled no version")
	}
	t.Logf("%d versions recycled", recycled)
}
