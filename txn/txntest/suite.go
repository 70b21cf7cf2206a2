package txntest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/workload"
)

// Run runs the conformance suite on the protocol whose empty databases
// newDB makes (one per subtest; the suite closes it). Each subtest is a
// property of txn.DB's contract.
func Run(t *testing.T, newDB func(t *testing.T) txn.DB) {
	for _, c := range []struct {
		name string
		f    func(*testing.T, txn.DB)
	}{
		{"ReadYourWrites", testReadYourWrites},
		{"InsertExisting", testInsertExisting},
		{"Missing", testMissing},
		{"AbortLeavesNothing", testAbortLeavesNothing},
		{"FailedCommitLeavesNothing", testFailedCommitLeavesNothing},
		{"Limits", testLimits},
		{"Finished", testFinished},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"SmallBankChecked", testSmallBankChecked},
		{"TATPChecked", testTATPChecked},
		{"YCSBTCounted", testYCSBTCounted},
		{"CancelledContext", testCancelledContext},
		{"CloseUnderWay", testCloseUnderWay},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := &closeOnce{DB: newDB(t)}
			defer func() {
				if err := db.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			c.f(t, db)
		})
	}
}

// closeOnce closes its DB once: the suite closes every DB at the end,
// CloseUnderWay before.
type closeOnce struct {
	txn.DB
	once sync.Once
	err  error
}

// Close closes the DB the first time.
func (c *closeOnce) Close() error {
	c.once.Do(func() { c.err = c.DB.Close() })
	return c.err
}

// ctxFor bounds a subtest's calls.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// commit runs fn in one transaction and commits it, failing the test on
// any error.
func commit(t *testing.T, db txn.DB, fn func(txn.Tx) error) {
	t.Helper()
	if err := txn.Run(ctxFor(t), db, fn); err != nil {
		t.Fatal(err)
	}
}

// state reads keys in a transaction: their values, nil for a missing one.
func state(t *testing.T, db txn.DB, keys ...string) [][]byte {
	t.Helper()
	out := make([][]byte, len(keys))
	commit(t, db, func(tx txn.Tx) error {
		for i, k := range keys {
			v, err := tx.Get([]byte(k))
			switch {
			case errors.Is(err, txn.ErrNotFound):
				out[i] = nil
			case err != nil:
				return err
			default:
				out[i] = v
			}
		}
		return nil
	})
	return out
}

// expect asserts keys hold want (nil: missing).
func expect(t *testing.T, db txn.DB, keys []string, want ...string) {
	t.Helper()
	got := state(t, db, keys...)
	for i, k := range keys {
		if want[i] == "" && got[i] != nil || want[i] != "" && string(got[i]) != want[i] {
			t.Fatalf("%s holds %q, want %q (empty: missing)", k, got[i], want[i])
		}
	}
}

// put commits key=value pairs.
func put(t *testing.T, db txn.DB, kv ...string) {
	t.Helper()
	commit(t, db, func(tx txn.Tx) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Put([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
}

// testReadYourWrites: a transaction sees its own puts, inserts and
// deletes; others see them once it committed.
func testReadYourWrites(t *testing.T, db txn.DB) {
	put(t, db, "ryw/a", "1", "ryw/d", "old")
	tx, err := db.Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		op   func() error
		key  string
		want string // "" for missing
	}{
		{func() error { return tx.Put([]byte("ryw/a"), []byte("2")) }, "ryw/a", "2"},
		{func() error { return tx.Insert([]byte("ryw/b"), []byte("new")) }, "ryw/b", "new"},
		{func() error { return tx.Put([]byte("ryw/b"), []byte("newer")) }, "ryw/b", "newer"},
		{func() error { return tx.Delete([]byte("ryw/d")) }, "ryw/d", ""},
		{func() error { return tx.Insert([]byte("ryw/d"), []byte("again")) }, "ryw/d", "again"},
		{func() error { return tx.Put([]byte("ryw/c"), []byte("x")) }, "ryw/c", "x"},
		{func() error { return tx.Delete([]byte("ryw/c")) }, "ryw/c", ""},
	}
	for i, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		v, err := tx.Get([]byte(s.key))
		if s.want == "" && !errors.Is(err, txn.ErrNotFound) || s.want != "" && (err != nil || string(v) != s.want) {
			t.Fatalf("step %d: Get(%s) = %q, %v; want %q", i, s.key, v, err, s.want)
		}
	}
	// The value Get returned is the caller's.
	v, _ := tx.Get([]byte("ryw/a"))
	v[0] = 'X'
	if v, _ := tx.Get([]byte("ryw/a")); string(v) != "2" {
		t.Fatalf("changing Get's result changed the transaction's value to %q", v)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	expect(t, db, []string{"ryw/a", "ryw/b", "ryw/c", "ryw/d"}, "2", "newer", "", "again")
}

// testInsertExisting: Insert of a key with a record fails with
// ErrExists, at Insert or at Commit, and writes nothing.
func testInsertExisting(t *testing.T, db txn.DB) {
	put(t, db, "ins/k", "v")
	tx, err := db.Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put([]byte("ins/other"), []byte("o")); err != nil {
		t.Fatal(err)
	}
	err = tx.Insert([]byte("ins/k"), []byte("w"))
	if err == nil {
		err = tx.Commit()
	} else {
		tx.Abort()
	}
	if !errors.Is(err, txn.ErrExists) {
		t.Fatalf("Insert of an existing key: %v, want ErrExists", err)
	}
	expect(t, db, []string{"ins/k", "ins/other"}, "v", "")
}

// testMissing: Get and Delete of a key without a record (never written,
// or deleted) return ErrNotFound.
func testMissing(t *testing.T, db txn.DB) {
	put(t, db, "miss/gone", "v")
	commit(t, db, func(tx txn.Tx) error { return tx.Delete([]byte("miss/gone")) })
	for _, k := range []string{"miss/never", "miss/gone"} {
		tx, err := db.Begin(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Get([]byte(k)); !errors.Is(err, txn.ErrNotFound) {
			t.Fatalf("Get(%s): %v, want ErrNotFound", k, err)
		}
		if err := tx.Delete([]byte(k)); !errors.Is(err, txn.ErrNotFound) {
			t.Fatalf("Delete(%s): %v, want ErrNotFound", k, err)
		}
		tx.Abort()
	}
}

// testAbortLeavesNothing: an aborted transaction's puts, inserts and
// deletes are not visible.
func testAbortLeavesNothing(t *testing.T, db txn.DB) {
	put(t, db, "ab/a", "1", "ab/d", "keep")
	tx, err := db.Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{tx.Put([]byte("ab/a"), []byte("2")), tx.Insert([]byte("ab/new"), []byte("n")),
		tx.Delete([]byte("ab/d"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	tx.Abort()
	expect(t, db, []string{"ab/a", "ab/new", "ab/d"}, "1", "", "keep")
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	expect(t, db, []string{"ab/a", "ab/new", "ab/d"}, "1", "", "keep")
}

// testFailedCommitLeavesNothing: two read-modify-writes of one key that
// overlap cannot both commit (a lost update); the one that fails leaves
// none of its writes.
func testFailedCommitLeavesNothing(t *testing.T, db txn.DB) {
	put(t, db, "fc/k", "0")
	ctx := ctxFor(t)
	rmw := func(tx txn.Tx, name string) error {
		v, err := tx.Get([]byte("fc/k"))
		if err != nil {
			return err
		}
		if err := tx.Put([]byte("fc/k"), append(v, name...)); err != nil {
			return err
		}
		return tx.Put([]byte("fc/"+name), []byte(name))
	}
	t1, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err1 := rmw(t1, "t1")
	// T2 runs whole while T1 is open (in its own goroutine: a protocol
	// may make it wait for T1).
	err2 := make(chan error, 1)
	go func() {
		t2, err := db.Begin(ctx)
		if err == nil {
			if err = rmw(t2, "t2"); err == nil {
				err = t2.Commit()
			} else {
				t2.Abort()
			}
		}
		err2 <- err
	}()
	var e2 error
	ended := false
	select {
	case e2 = <-err2:
		ended = true
	case <-time.After(2 * time.Second): // T2 waits for T1: let T1 end first
	}
	if err1 == nil {
		err1 = t1.Commit()
	} else {
		t1.Abort()
	}
	if !ended {
		select {
		case e2 = <-err2:
		case <-time.After(10 * time.Second):
			t.Fatal("the second transaction never ended")
		}
	}
	final := string(state(t, db, "fc/k")[0])
	if err1 == nil && e2 == nil {
		// Legal only if T2 waited for T1 and read its write (or the
		// reverse): a protocol that blocks instead of aborting.
		if final != "0t1t2" && final != "0t2t1" {
			t.Fatalf("both read-modify-writes of one key committed and the key holds %q: lost update", final)
		}
		t.Log("no commit failed: the second transaction waited for the first")
		return
	}
	want := "0"
	for _, c := range []struct {
		name string
		err  error
	}{{"t1", err1}, {"t2", e2}} {
		if c.err == nil {
			want += c.name
			expect(t, db, []string{"fc/" + c.name}, c.name)
			continue
		}
		if !errors.Is(c.err, txn.ErrAborted) {
			t.Fatalf("%s failed with %v, want an abort", c.name, c.err)
		}
		expect(t, db, []string{"fc/" + c.name}, "")
	}
	if final != want {
		t.Fatalf("the key holds %q, want %q", final, want)
	}
}

// testLimits: keys of 1 to MaxKey bytes and values up to MaxValue bytes
// work; an empty key, a longer key or a longer value is ErrTooLarge.
func testLimits(t *testing.T, db txn.DB) {
	key := bytes.Repeat([]byte{'k'}, txn.MaxKey)
	val := bytes.Repeat([]byte{'v'}, txn.MaxValue)
	put(t, db, string(key), string(val), "l", "")
	commit(t, db, func(tx txn.Tx) error {
		v, err := tx.Get(key)
		if err != nil || !bytes.Equal(v, val) {
			return fmt.Errorf("the largest record read back as %d bytes: %w", len(v), err)
		}
		if v, err := tx.Get([]byte("l")); err != nil || len(v) != 0 {
			return fmt.Errorf("an empty value read back as %q: %w", v, err)
		}
		return nil
	})
	long := append(key, 'k')
	for _, c := range []struct {
		name string
		op   func(txn.Tx) error
	}{
		{"Put long key", func(tx txn.Tx) error { return tx.Put(long, nil) }},
		{"Put long value", func(tx txn.Tx) error { return tx.Put([]byte("l"), append(val, 'v')) }},
		{"Insert long key", func(tx txn.Tx) error { return tx.Insert(long, nil) }},
		{"Insert long value", func(tx txn.Tx) error { return tx.Insert([]byte("l2"), append(val, 'v')) }},
		{"Get empty key", func(tx txn.Tx) error { _, err := tx.Get(nil); return err }},
		{"Get long key", func(tx txn.Tx) error { _, err := tx.Get(long); return err }},
		{"Delete empty key", func(tx txn.Tx) error { return tx.Delete(nil) }},
	} {
		tx, err := db.Begin(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.op(tx); !errors.Is(err, txn.ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", c.name, err)
		}
		tx.Abort()
	}
}

// testFinished: a committed transaction's operations return ErrDone.
func testFinished(t *testing.T, db txn.DB) {
	tx, err := db.Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put([]byte("fin/k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Get([]byte("fin/k")); !errors.Is(err, txn.ErrDone) {
		t.Errorf("Get after Commit: %v, want ErrDone", err)
	}
	if err := tx.Put([]byte("fin/k"), []byte("w")); !errors.Is(err, txn.ErrDone) {
		t.Errorf("Put after Commit: %v, want ErrDone", err)
	}
	if err := tx.Commit(); !errors.Is(err, txn.ErrDone) {
		t.Errorf("second Commit: %v, want ErrDone", err)
	}
	tx.Abort() // does nothing
	expect(t, db, []string{"fin/k"}, "v")
}

// testConcurrentIncrements: goroutines incrementing counters through
// txn.Run lose no update.
func testConcurrentIncrements(t *testing.T, db txn.DB) {
	const workers, each, counters = 8, 40, 3
	ctx := ctxFor(t)
	keys := make([]string, counters)
	for i := range keys {
		keys[i] = fmt.Sprintf("inc/%d", i)
		put(t, db, keys[i], "0")
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := []byte(keys[(w+i)%counters])
				err := txn.Run(ctx, db, func(tx txn.Tx) error {
					v, err := tx.Get(k)
					if err != nil {
						return err
					}
					var n int
					if _, err := fmt.Sscan(string(v), &n); err != nil {
						return err
					}
					return tx.Put(k, fmt.Append(nil, n+1))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for _, v := range state(t, db, keys...) {
		var n int
		_, _ = fmt.Sscan(string(v), &n)
		total += n
	}
	if total != workers*each {
		t.Fatalf("counters add up to %d, want %d: updates lost", total, workers*each)
	}
}

// traced runs a workload on db from goroutines with every committed
// transaction's trace (loading included) recorded, and checks the
// history for serializability.
// Each trace also goes to the also functions.
func traced[O any](t *testing.T, db txn.DB, w workload.TxnWorkload[O], load func(context.Context, txn.DB, workload.TxnLoad) error,
	also ...func(reads, writes []txn.Access)) *workload.TxnResult {
	t.Helper()
	ctx := ctxFor(t)
	h := check.NewHistory()
	trace := func(reads, writes []txn.Access) {
		h.Add(reads, writes)
		for _, f := range also {
			f(reads, writes)
		}
	}
	if err := load(ctx, db, workload.TxnLoad{Trace: trace}); err != nil {
		t.Fatal(err)
	}
	res, err := workload.RunTxn(ctx, workload.TxnRun{Threads: 6, Duration: 300 * time.Millisecond, Seed: 7, Trace: trace}, w, db)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed > 0 || res.Unknown > 0 || res.Committed == 0 {
		t.Fatalf("%d committed, %d failed (first: %v), %d unknown", res.Committed, res.Failed, res.FirstErr, res.Unknown)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions traced: %v", h.Len(), err)
	}
	t.Logf("%d committed (%.0f/s), %d rejected, %d aborts, %d traced", res.Committed, res.Rate(), res.Rejected, res.TotalAborts(), h.Len())
	return res
}

// testSmallBankChecked: SmallBank on a small, contended bank: the
// traces are serializable and the money adds up.
func testSmallBankChecked(t *testing.T, db txn.DB) {
	sb := &workload.SmallBank{Accounts: 200, HotAccounts: 10}
	res := traced(t, db, sb, sb.Load)
	if err := sb.CheckMoney(ctxFor(t), db, res); err != nil {
		t.Fatal(err)
	}
}

// testTATPChecked: TATP's traces, inserts and deletes of call
// forwarding included, are serializable.
func testTATPChecked(t *testing.T, db txn.DB) {
	tp := &workload.TATP{Subscribers: 100}
	res := traced(t, db, tp, tp.Load)
	if res.Kinds[workload.InsertCallForwarding].Committed+res.Kinds[workload.DeleteCallForwarding].Committed == 0 {
		t.Log("no call forwarding inserted or deleted in this short run")
	}
}

// testYCSBTCounted: YCSB-T under zipf 0.9 on 50 keys: the traces are
// serializable and the records' counters add up to the increments the
// committed transactions made, each applied once.
func testYCSBTCounted(t *testing.T, db txn.DB) {
	y := &workload.YCSBT{Keys: 50, Zipf: 0.9}
	var increments atomic.Int64
	var loaded atomic.Bool
	traced(t, db, y, func(ctx context.Context, db txn.DB, cfg workload.TxnLoad) error {
		err := y.Load(ctx, db, cfg)
		loaded.Store(true)
		return err
	}, func(_, writes []txn.Access) {
		if loaded.Load() {
			increments.Add(int64(len(writes)))
		}
	})
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = string(workload.YCSBTKey(uint64(i)))
	}
	var sum int64
	for _, v := range state(t, db, keys...) {
		if len(v) < 8 {
			t.Fatalf("a record of %d bytes", len(v))
		}
		sum += int64(binary.BigEndian.Uint64(v))
	}
	if sum != increments.Load() {
		t.Fatalf("counters add up to %d, the committed transactions made %d increments", sum, increments.Load())
	}
}

// testCancelledContext: once a transaction's context is cancelled, its
// next operation or its Commit returns promptly with a Timeout abort,
// and it leaves nothing.
func testCancelledContext(t *testing.T, db txn.DB) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put([]byte("cc/k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	cancel()
	done := make(chan error, 1)
	go func() {
		err := tx.Put([]byte("cc/j"), []byte("v"))
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Abort()
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Second):
		t.Fatal("a cancelled transaction still runs after a second")
	}
	if !errors.Is(err, txn.ErrAborted) || txn.ReasonOf(err) != txn.Timeout {
		t.Fatalf("cancelled transaction: %v, want a Timeout abort", err)
	}
	expect(t, db, []string{"cc/k", "cc/j"}, "", "")
}

// testCloseUnderWay: Close with transactions running returns within a
// second, and so do the transactions.
func testCloseUnderWay(t *testing.T, db txn.DB) {
	put(t, db, "cl/k", "0")
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	started := make(chan bool, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				err := txn.Run(ctx, db, func(tx txn.Tx) error {
					if _, err := tx.Get([]byte("cl/k")); err != nil {
						return err
					}
					return tx.Put([]byte("cl/k"), []byte("1"))
				})
				if n == 0 {
					started <- true
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for range 4 {
		<-started
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Close with transactions under way did not return within a second")
	}
	ended := make(chan bool)
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(time.Second):
		t.Fatal("transactions still run a second after Close")
	}
	if _, err := db.Begin(context.Background()); !errors.Is(err, txn.ErrClosed) {
		t.Fatalf("Begin after Close: %v, want ErrClosed", err)
	}
}
