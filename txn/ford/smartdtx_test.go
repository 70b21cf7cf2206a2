package ford_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/workload"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// smartBed is a bed whose clients are Smart-DTX with techniques on.
func smartBed(t testing.TB, n int, layout ford.Layout, techniques ford.Technique) *bed {
	b := newBed(t, n, layout)
	b.smart = &ford.SmartConfig{Workers: 2, Tasks: 4, Techniques: techniques}
	return b
}

// TestSmartConformance runs the txn conformance suite on Smart-DTX.
func TestSmartConformance(t *testing.T) {
	txntest.Run(t, func(t *testing.T) txn.DB {
		return smartBed(t, 3, ford.Layout{Buckets: 2048, Coordinators: 16}, ford.AllTechniques).db()
	})
}

// ablation is every technique on, each alone, none, and throttling with
// a fixed limit: the configurations of an ablation.
var ablation = []struct {
	name string
	cfg  ford.SmartConfig
}{
	{"all", ford.SmartConfig{Techniques: ford.AllTechniques}},
	{"throttling", ford.SmartConfig{Techniques: ford.Throttling}},
	{"throttling-fixed", ford.SmartConfig{Techniques: ford.Throttling, Limit: 6}},
	{"backoff", ford.SmartConfig{Techniques: ford.Backoff}},
	{"coroutine-throttle", ford.SmartConfig{Techniques: ford.CoroutineThrottle}},
	{"none", ford.SmartConfig{}},
}

// TestSmartChecked runs checked SmallBank (two clients, one reading
// backups) and YCSB-T on Smart-DTX in every configuration of the
// ablation: serializable, the money and the counters add up, every
// commit in at most three round trips.
func TestSmartChecked(t *testing.T) {
	for _, a := range ablation {
		t.Run(a.name, func(t *testing.T) {
			cfg := a.cfg
			cfg.Workers, cfg.Tasks = 2, 3
			t.Run("SmallBank", func(t *testing.T) {
				b := newBed(t, 3, smallLayout)
				b.smart = &cfg
				db, db2, n := checkedSmallBank(t, b)
				for _, d := range []*ford.DB{db, db2} {
					if st := d.Stats(); st.MaxCommitRounds > 3 || st.ReadWrite == 0 {
						t.Fatalf("%d read-write commits, at most %d round trips each: want some, ≤ 3", st.ReadWrite, st.MaxCommitRounds)
					}
				}
				checkTechniques(t, db, cfg)
				t.Logf("%d transactions checked; client 1 %+v; workers %+v", n, db.Stats(), db.SmartStats())
			})
			t.Run("YCSBT", func(t *testing.T) {
				b := newBed(t, 3, smallLayout)
				b.smart = &cfg
				db := b.db()
				ctx := tctx(t)
				y := &workload.YCSBT{Keys: 50, Zipf: 0.9}
				h := check.NewHistory()
				if err := y.Load(ctx, db, workload.TxnLoad{Trace: h.Add}); err != nil {
					t.Fatal(err)
				}
				var increments atomic.Int64
				runChecked(t, ctx, y, func(reads, writes []txn.Access) {
					h.Add(reads, writes)
					increments.Add(int64(len(writes)))
				}, db)
				if err := h.Check(); err != nil {
					t.Fatalf("%d transactions: %v", h.Len(), err)
				}
				if sum := ycsbtSum(t, ctx, db, 50); sum != increments.Load() {
					t.Fatalf("counters add up to %d, the committed transactions made %d increments", sum, increments.Load())
				}
				if st := db.Stats(); st.MaxCommitRounds > 3 {
					t.Fatalf("a commit of %d round trips", st.MaxCommitRounds)
				}
				checkTechniques(t, db, cfg)
				t.Logf("%d transactions checked; %+v; workers %+v", h.Len(), db.Stats(), db.SmartStats())
			})
		})
	}
}

// checkTechniques checks what the workers report against the switches:
// one worker each with Tasks as n_max (or below it, with the coroutine
// throttle), a fixed limit kept, no credits owed once idle.
func checkTechniques(t *testing.T, db *ford.DB, cfg ford.SmartConfig) {
	t.Helper()
	ws := db.SmartStats()
	if len(ws) != cfg.Workers {
		t.Fatalf("%d workers, want %d", len(ws), cfg.Workers)
	}
	for i, w := range ws {
		switch {
		case w.Tasks > cfg.Tasks || cfg.Techniques&ford.CoroutineThrottle == 0 && w.Tasks != cfg.Tasks:
			t.Errorf("worker %d: n_max %d (tasks %d, %v)", i, w.Tasks, cfg.Tasks, cfg.Techniques)
		case cfg.Techniques&ford.Throttling != 0 && cfg.Limit > 0 && w.Limit != cfg.Limit:
			t.Errorf("worker %d: limit %d, want the fixed %d", i, w.Limit, cfg.Limit)
		case w.Completed == 0:
			t.Errorf("worker %d completed no work request", i)
		}
	}
}

// ycsbtSum is the sum of YCSB-T's n counters.
func ycsbtSum(t *testing.T, ctx context.Context, db txn.DB, n int) int64 {
	t.Helper()
	var sum int64
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		sum = 0
		for i := range n {
			v, err := tx.Get(workload.YCSBTKey(uint64(i)))
			if err != nil {
				return err
			}
			sum += int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestSmartCrashPoints runs the crash-point test on Smart-DTX clients
// (every technique on): stopped at every commit step, a coordinator's
// transaction is recovered by a surviving client as under FORD.
func TestSmartCrashPoints(t *testing.T) {
	testCrashPoints(t, smartBed(t, 3, smallLayout, ford.AllTechniques))
}

// TestSmartRoundsUnchanged runs the same transfers one at a time on FORD
// and on Smart-DTX: the same post lists and round trips, at most three
// after execution.
func TestSmartRoundsUnchanged(t *testing.T) {
	ctx := tctx(t)
	var stats []ford.Stats
	for _, techniques := range []ford.Technique{0, ford.AllTechniques} {
		b := newBed(t, 3, smallLayout)
		if techniques != 0 {
			b.smart = &ford.SmartConfig{Workers: 2, Techniques: techniques}
		}
		db := b.db()
		if err := txn.Run(ctx, db, func(tx txn.Tx) error {
			for i := range 20 {
				if err := tx.Put(acct(i), []byte("100")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			a, c := acct(i%20), acct((i*7+1)%20)
			if string(a) == string(c) {
				continue
			}
			if err := txn.Run(ctx, db, func(tx txn.Tx) error { return transfer(tx, a, c, 1) }); err != nil {
				t.Fatal(err)
			}
		}
		stats = append(stats, db.Stats())
	}
	f, s := stats[0], stats[1]
	if f.Rounds != s.Rounds || f.Lists != s.Lists || f.CommitRounds != s.CommitRounds || s.MaxCommitRounds > 3 {
		t.Fatalf("FORD %+v\nSmart-DTX %+v: want the same rounds and lists, ≤ 3 after execution", f, s)
	}
	t.Logf("%d rounds, %d lists, %.2f round trips per commit after execution", s.Rounds, s.Lists, float64(s.CommitRounds)/float64(s.ReadWrite))
}

// TestSmartBackoffRetries: a Put on a record another transaction holds
// locked aborts at once without Backoff; with it, the lock round backs
// off and retries until the holder commits, and the Put succeeds.
func TestSmartBackoffRetries(t *testing.T) {
	ctx := tctx(t)
	for _, backoff := range []bool{false, true} {
		b := newBed(t, 3, smallLayout)
		cfg := ford.SmartConfig{Workers: 2, MaxRetries: 2000, C0: 20 * time.Microsecond, BackoffLimit: 200 * time.Microsecond}
		if backoff {
			cfg.Techniques = ford.Backoff
		}
		b.smart = &cfg
		db := b.db()
		holder, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Put([]byte("hot"), []byte("1")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			tx, err := db.Begin(ctx)
			if err != nil {
				done <- err
				return
			}
			if err := tx.Put([]byte("hot"), []byte("2")); err != nil {
				done <- err
				return
			}
			done <- tx.Commit()
		}()
		var err2 error
		if backoff {
			time.Sleep(20 * time.Millisecond) // the waiter retries meanwhile
			if err := holder.Commit(); err != nil {
				t.Fatal(err)
			}
			err2 = <-done
		} else {
			err2 = <-done
			holder.Abort()
		}
		switch {
		case backoff && err2 != nil:
			t.Fatalf("with backoff: %v, want the Put to wait for the lock", err2)
		case !backoff && txn.ReasonOf(err2) != txn.LockConflict:
			t.Fatalf("without backoff: %v, want a LockConflict abort", err2)
		}
		if st := db.Stats(); backoff && st.LockAborts != 0 {
			t.Fatalf("with backoff: %+v, want no lock abort", st)
		}
	}
}

// TestSmartBackoffOnlyWherePaying: with Backoff, a Put on a locked
// record aborts at once (LockConflict) when the transaction read the
// record first or holds another lock — a wait would end in a failed
// validation or a hold-and-wait.
func TestSmartBackoffOnlyWherePaying(t *testing.T) {
	ctx := tctx(t)
	b := newBed(t, 3, smallLayout)
	b.smart = &ford.SmartConfig{Workers: 1, MaxRetries: 2000, C0: 20 * time.Microsecond, BackoffLimit: 200 * time.Microsecond,
		Techniques: ford.Backoff}
	db := b.db()
	seed, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hot", "other"} {
		if err := seed.Put([]byte(k), []byte("0")); err != nil {
			t.Fatal(err)
		}
	}
	if err := seed.Commit(); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Abort()
	if err := holder.Put([]byte("hot"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		first func(tx txn.Tx) error
	}{
		{"read first", func(tx txn.Tx) error { _, err := tx.Get([]byte("hot")); return err }},
		{"holding a lock", func(tx txn.Tx) error { return tx.Put([]byte("other"), []byte("2")) }},
	} {
		before := db.Stats().LockAborts
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.first(tx); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		start := time.Now()
		err = tx.Put([]byte("hot"), []byte("2"))
		if txn.ReasonOf(err) != txn.LockConflict {
			t.Fatalf("%s: Put on a held lock: %v, want a LockConflict abort", c.name, err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%s: the abort took %v: it waited", c.name, d)
		}
		if db.Stats().LockAborts != before+1 {
			t.Errorf("%s: lock aborts %d → %d, want one more", c.name, before, db.Stats().LockAborts)
		}
	}
}

// TestSmartCancel: a transaction whose context ends mid-round (its node
// paused) aborts with Timeout; its lock is released, and the client goes
// on committing once the node is back.
func TestSmartCancel(t *testing.T) {
	ctx := tctx(t)
	b := smartBed(t, 3, smallLayout, ford.AllTechniques)
	db := b.db()
	key := []byte("cancel/0")
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(key, []byte("0")) }); err != nil {
		t.Fatal(err)
	}
	// Cancelled between operations: the lock taken is released.
	cctx, cancel := context.WithCancel(ctx)
	tx, err := db.Begin(cctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put(key, []byte("1")); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := tx.Put([]byte("cancel/1"), []byte("1")); txn.ReasonOf(err) != txn.Timeout {
		t.Fatalf("after cancel: %v, want a Timeout abort", err)
	}
	tx2, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx2.Put(key, []byte("2")); err != nil {
		t.Fatalf("the cancelled transaction's lock: %v", err)
	}
	if err := tx2.Commit(); err != nil {
		t.Fatal(err)
	}
	// Cancelled while a round is in flight to a paused node.
	shard := txn.Shard(key, 3)
	fab := loop.Get(b.fabric)
	if err := fab.Pause(fmt.Sprintf("n%d", shard)); err != nil {
		t.Fatal(err)
	}
	tctx2, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel2()
	tx3, err := db.Begin(tctx2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx3.Get(key)
	if txn.ReasonOf(err) != txn.Timeout {
		t.Fatalf("a read from a paused node: %v, want a Timeout abort", err)
	}
	if err := fab.Resume(fmt.Sprintf("n%d", shard)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := txn.Run(ctx, db, func(tx txn.Tx) error {
		v, err := tx.Get(key)
		got = v
		if err != nil {
			return err
		}
		return tx.Put(key, []byte("3"))
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "2" {
		t.Fatalf("read %q, want 2", got)
	}
}

// TestSmartNodeGone: with a memory node closed, Smart-DTX transactions
// that reach it fail with ErrUnreachable within a bound on every worker
// instead of hanging, the others commit, and Close still returns.
func TestSmartNodeGone(t *testing.T) {
	b := smartBed(t, 3, smallLayout, ford.AllTechniques)
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
	var failed, ok atomic.Int32
	errs := make(chan error, len(keys))
	for _, k := range keys {
		go func() {
			err := txn.Run(ctx, db, func(tx txn.Tx) error { return tx.Put(k, []byte("2")) })
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, txn.ErrUnreachable):
				failed.Add(1)
			}
			errs <- err
		}()
	}
	for range keys {
		if err := <-errs; err != nil && !errors.Is(err, txn.ErrUnreachable) {
			t.Fatalf("%v, want ErrUnreachable", err)
		}
	}
	// Shards 0 and 1 have a copy on node 1 (its backup, its primary);
	// shard 2 (nodes 2 and 0) does not, but a coordinator whose log is on
	// node 1 fails those too.
	want := int32(0)
	for _, k := range keys {
		if txn.Shard(k, 3) != 2 {
			want++
		}
	}
	if failed.Load() < want || failed.Load()+ok.Load() != int32(len(keys)) {
		t.Fatalf("%d writes failed, %d committed; want at least the %d with a copy on the node gone failed", failed.Load(), ok.Load(), want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("30 transactions took %v with a node gone", d)
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs with a node gone")
	}
}

// TestSmartTCP runs checked SmallBank over the tcp transport with a FORD
// client and a Smart-DTX client on the same nodes at once: the two
// issuers share the database.
func TestSmartTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("tcp sockets")
	}
	var nodes []string
	for range 3 {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			Memory: smallLayout.NodeBytes(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		nodes = append(nodes, srv.Info().CM)
	}
	b := &bed{t: t, addrs: nodes, layout: smallLayout}
	ctx := tctx(t)
	fordDB := b.dbWith(ford.Config{Device: "tcp://127.0.0.1:0", Nodes: nodes, Layout: smallLayout})
	smartDB := b.dbWith(ford.Config{Device: "tcp://127.0.0.1:0", Nodes: nodes, Layout: smallLayout,
		Smart: &ford.SmartConfig{Workers: 2, Tasks: 4, Techniques: ford.AllTechniques}})
	sb := &workload.SmallBank{Accounts: 100, HotAccounts: 10}
	h := check.NewHistory()
	if err := sb.Load(ctx, fordDB, workload.TxnLoad{Trace: h.Add}); err != nil {
		t.Fatal(err)
	}
	runs := make([]*workload.TxnResult, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, db := range []*ford.DB{fordDB, smartDB} {
		wg.Go(func() {
			runs[i], errs[i] = workload.RunTxn(ctx, workload.TxnRun{Threads: 4, Duration: 300 * time.Millisecond, Seed: int64(5 + i), Trace: h.Add}, sb, db)
		})
	}
	wg.Wait()
	for i, res := range runs {
		if errs[i] != nil || res.Failed > 0 || res.Committed == 0 {
			t.Fatalf("client %d: %v: %d committed, %d failed (%v)", i, errs[i], res.Committed, res.Failed, res.FirstErr)
		}
	}
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	if err := sb.CheckMoney(ctx, smartDB, runs...); err != nil {
		t.Fatal(err)
	}
	if st := smartDB.Stats(); st.MaxCommitRounds > 3 {
		t.Fatalf("Smart-DTX over tcp: a commit of %d round trips", st.MaxCommitRounds)
	}
	t.Logf("%d transactions over tcp; FORD %d committed, Smart-DTX %d", h.Len(), runs[0].Committed, runs[1].Committed)
}
