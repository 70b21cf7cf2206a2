package ford_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
)

const (
	crashLease = 100 * time.Millisecond
	initial    = 100
	accounts   = 12
)

// crashBed is a bed whose clients have short leases.
func crashBed(t *testing.T) *bed { return newBed(t, 3, smallLayout) }

func (b *bed) leased(hook func(ford.Step) bool) *ford.DB {
	cfg := b.config()
	cfg.Lease, cfg.Hook = crashLease, hook
	return b.dbWith(cfg)
}

// loadedPair writes 100 to two keys on different shards through a fresh
// leased client, and returns it with the keys.
func (b *bed) loadedPair(t *testing.T, ctx context.Context) (loader *ford.DB, pa, pb []byte) {
	t.Helper()
	loader = b.leased(nil)
	pa, pb = onShards(0, 3)
	if err := txn.Run(ctx, loader, func(tx txn.Tx) error {
		tx.Put(pa, []byte("100"))
		return tx.Put(pb, []byte("100"))
	}); err != nil {
		t.Fatal(err)
	}
	return loader, pa, pb
}

// stoppedTransfer runs a transfer of 1 from pa to pb on a leased client
// stopped at step of its commit, then cuts that client off (its
// goroutines and QPs: a dead coordinator), and returns its coordinator
// id.
func (b *bed) stoppedTransfer(t *testing.T, ctx context.Context, pa, pb []byte, step ford.Step) int {
	t.Helper()
	victim := b.leased(func(s ford.Step) bool { return s != step })
	tx, _ := victim.Begin(ctx)
	if err := transfer(tx, pa, pb, 1); err != nil {
		t.Fatal(err)
	}
	id := tx.(*ford.Tx).Coordinator()
	if id != ford.CoordID(tx.(*ford.Tx)) {
		t.Fatalf("Coordinator %d, the coordinator's id %d", id, ford.CoordID(tx.(*ford.Tx)))
	}
	if err := tx.Commit(); !errors.Is(err, ford.ErrStopped) {
		t.Fatal(err)
	}
	ford.Kill(victim)
	return id
}

// onShards returns two keys of round r on different shards.
func onShards(r, shards int) ([]byte, []byte) {
	a := []byte(fmt.Sprintf("victim/%d/a", r))
	for i := 0; ; i++ {
		k := []byte(fmt.Sprintf("victim/%d/b%d", r, i))
		if txn.Shard(k, shards) != txn.Shard(a, shards) {
			return a, k
		}
	}
}

func acct(i int) []byte { return []byte(fmt.Sprintf("acct/%d", i)) }

// transfer moves n from a to b.
func transfer(tx txn.Tx, a, b []byte, n int) error {
	va, err := tx.Get(a)
	if err != nil {
		return err
	}
	vb, err := tx.Get(b)
	if err != nil {
		return err
	}
	x, _ := strconv.Atoi(string(va))
	y, _ := strconv.Atoi(string(vb))
	if err := tx.Put(a, []byte(strconv.Itoa(x-n))); err != nil {
		return err
	}
	return tx.Put(b, []byte(strconv.Itoa(y+n)))
}

// balances reads keys in one transaction.
func balances(ctx context.Context, db txn.DB, keys ...[]byte) ([]int, error) {
	out := make([]int, len(keys))
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		for i, k := range keys {
			v, err := tx.Get(k)
			if err != nil {
				return err
			}
			out[i], _ = strconv.Atoi(string(v))
		}
		return nil
	})
	return out, err
}

// TestCrashPoints stops a coordinator at every step of its commit and
// cuts its connections, while a worker keeps transferring between shared
// accounts. A surviving client that meets the dead transaction's locks
// recovers it — forward once it was logged, back before — within the
// lease and a bound; nothing is half applied, the history is
// serializable and the money adds up.
func TestCrashPoints(t *testing.T) { testCrashPoints(t, crashBed(t)) }

func testCrashPoints(t *testing.T, b *bed) {
	ctx := tctx(t)
	loader := b.leased(nil)
	h := check.NewHistory()
	err := txn.Run(ctx, loader, func(tx txn.Tx) error {
		for i := range accounts {
			if err := tx.Put(acct(i), []byte(strconv.Itoa(initial))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Add(loaderTrace(t, ctx, loader))
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var commits atomic.Int64
	worker := b.leased(nil)
	wg.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			a, c := acct(i%accounts), acct((i*7+1)%accounts)
			if string(a) == string(c) {
				continue
			}
			var tr txn.Traced
			err := txn.Run(wctx, worker, func(tx txn.Tx) error { tr = tx.(txn.Traced); return transfer(tx, a, c, 1) })
			if err == nil {
				h.Add(tr.Trace())
				commits.Add(1)
			}
		}
	})
	survivor := b.leased(nil)
	var victims [][]byte
	for r, step := range ford.Steps {
		pa, pb := onShards(r, 3)
		victims = append(victims, pa, pb)
		if err := txn.Run(ctx, loader, func(tx txn.Tx) error {
			if err := tx.Put(pa, []byte(strconv.Itoa(initial))); err != nil {
				return err
			}
			return tx.Put(pb, []byte(strconv.Itoa(initial)))
		}); err != nil {
			t.Fatal(err)
		}
		var hits atomic.Int32
		victim := b.leased(func(s ford.Step) bool { return s != step || hits.Add(1) > 1 })
		// Attempts that abort (the worker changed the account read) are
		// run again until one reaches the step.
		err := txn.Run(ctx, victim, func(tx txn.Tx) error {
			if _, err := tx.Get(acct(r)); err != nil { // a read-only record: validation has work
				return err
			}
			return transfer(tx, pa, pb, 1)
		})
		if !errors.Is(err, ford.ErrStopped) {
			t.Fatalf("step %v: commit %v, want it stopped", step, err)
		}
		ford.Kill(victim)
		killed := time.Now()
		got, err := balances(ctx, survivor, pa, pb)
		if err != nil {
			t.Fatalf("step %v: %v", step, err)
		}
		took := time.Since(killed)
		committed := got[0] == initial-1 && got[1] == initial+1
		if !committed && (got[0] != initial || got[1] != initial) {
			t.Fatalf("step %v: half applied: %v", step, got)
		}
		if committed != (step >= ford.StepLogged) {
			t.Fatalf("step %v: committed %v", step, committed)
		}
		if took > crashLease+500*time.Millisecond {
			t.Fatalf("step %v: the records were locked %v after the crash (lease %v)", step, took, crashLease)
		}
		// Nothing of the victim's is left for a sweep to recover.
		if sw, err := survivor.Sweep(ctx); err != nil || sw.Recovered != 0 {
			t.Fatalf("step %v: a sweep after recovery found %+v (%v)", step, sw, err)
		}
		t.Logf("step %v: recovered in %v, committed %v", step, took.Round(time.Millisecond), committed)
	}
	stop()
	wg.Wait()
	st := survivor.Stats()
	if st.RolledForward == 0 || st.RolledBack == 0 {
		t.Fatalf("survivor %+v: want roll-forwards and roll-backs", st)
	}
	shared := make([][]byte, accounts)
	for i := range shared {
		shared[i] = acct(i)
	}
	total := 0
	for _, keys := range [][][]byte{shared, victims} {
		got, err := balances(ctx, loader, keys...)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range got {
			total += v
		}
	}
	if want := initial * (accounts + len(victims)); total != want {
		t.Fatalf("money: %d, want %d", total, want)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	t.Logf("%d worker commits checked; survivor %+v", commits.Load(), st)
}

// loaderTrace reads the shared accounts back as the load's trace: one
// write per account at version 1.
func loaderTrace(t *testing.T, ctx context.Context, db txn.DB) (reads, writes []txn.Access) {
	for i := range accounts {
		writes = append(writes, txn.Access{Key: string(acct(i)), Version: 1})
	}
	return nil, writes
}

// TestRecoverCommand: a coordinator dead after its log leaves its locks;
// Recover on its id (what `txn recover` runs) refuses while the lease
// runs, then rolls the transaction forward on every copy and frees the
// id — no client had to meet the locks.
func TestRecoverCommand(t *testing.T) {
	b := crashBed(t)
	ctx := tctx(t)
	loader, pa, pb := b.loadedPair(t, ctx)
	id := b.stoppedTransfer(t, ctx, pa, pb, ford.StepLogged)
	rescuer := b.leased(nil)
	if _, err := rescuer.Recover(ctx, id); !errors.Is(err, ford.ErrLeaseLive) {
		t.Fatalf("recover within the lease: %v, want ErrLeaseLive", err)
	}
	time.Sleep(crashLease + 20*time.Millisecond)
	rec, err := rescuer.Recover(ctx, id)
	if err != nil || !rec.Logged || rec.Copies != 4 || !rec.Freed {
		t.Fatalf("recover: %+v %v, want the log rolled forward on 4 copies and the id freed", rec, err)
	}
	if sw, err := rescuer.Sweep(ctx); err != nil || sw.Live+sw.Recovered != 0 {
		t.Fatalf("locks after Recover: %+v %v", sw, err)
	}
	if got, err := balances(ctx, loader, pa, pb); err != nil || got[0] != 99 || got[1] != 101 {
		t.Fatalf("after Recover: %v %v, want 99 and 101", got, err)
	}
	if rec, err := rescuer.Recover(ctx, id); err != nil || rec.Copies != 0 {
		t.Fatalf("a second Recover: %+v %v, want nothing to do", rec, err)
	}
}

// TestSweepRollsBack: a coordinator dead with its locks taken and no
// log: Sweep releases them once the lease is over, and not before.
func TestSweepRollsBack(t *testing.T) {
	b := crashBed(t)
	ctx := tctx(t)
	loader, pa, pb := b.loadedPair(t, ctx)
	b.stoppedTransfer(t, ctx, pa, pb, ford.StepValidated)
	sw, err := loader.Sweep(ctx)
	if err != nil || sw.Live != 2 || sw.Recovered != 0 {
		t.Fatalf("sweep within the lease: %+v %v, want 2 live locks (one per record)", sw, err)
	}
	time.Sleep(crashLease + 20*time.Millisecond)
	if sw, err = loader.Sweep(ctx); err != nil || sw.Live != 0 || sw.Recovered == 0 {
		t.Fatalf("sweep after the lease: %+v %v", sw, err)
	}
	if sw, err = loader.Sweep(ctx); err != nil || sw.Live+sw.Recovered != 0 {
		t.Fatalf("locks left: %+v %v", sw, err)
	}
	if got, err := balances(ctx, loader, pa, pb); err != nil || got[0] != 100 || got[1] != 100 {
		t.Fatalf("after the roll-back: %v %v", got, err)
	}
}

// TestCorruptLogRollsBack: a coordinator dead after its log WRITE, whose
// record is corrupt (a torn WRITE, a flipped bit): recovery finds no
// valid record and rolls the transaction back — its locks released,
// nothing of it applied.
func TestCorruptLogRollsBack(t *testing.T) {
	for _, off := range []int{0, 20, 40} { // magic, header, first entry
		b := crashBed(t)
		ctx := tctx(t)
		loader, pa, pb := b.loadedPair(t, ctx)
		id := b.stoppedTransfer(t, ctx, pa, pb, ford.StepLogged)
		if err := ford.CorruptLog(loader, id, off); err != nil {
			t.Fatal(err)
		}
		got, err := balances(ctx, loader, pa, pb)
		if err != nil || got[0] != 100 || got[1] != 100 {
			t.Fatalf("corrupt at %d: %v %v, want the transfer rolled back", off, got, err)
		}
		if st := loader.Stats(); st.RolledBack != 2 || st.RolledForward != 0 {
			t.Fatalf("corrupt at %d: %+v, want two roll-backs", off, st)
		}
	}
}

// TestLeaseFencing: a coordinator that has too little of its lease left
// never writes in place. Before its log it aborts (locks released,
// nothing applied); after its log it leaves the commit to recovery —
// its own, once the lease is over — and reports it committed.
func TestLeaseFencing(t *testing.T) {
	for _, c := range []struct {
		slow      ford.Step
		committed bool
	}{{ford.StepLocked, false}, {ford.StepLogged, true}} {
		b := crashBed(t)
		ctx := tctx(t)
		loader := b.leased(nil)
		pa, pb := onShards(0, 3)
		if err := txn.Run(ctx, loader, func(tx txn.Tx) error {
			tx.Put(pa, []byte("100"))
			return tx.Put(pb, []byte("100"))
		}); err != nil {
			t.Fatal(err)
		}
		slow := b.leased(func(s ford.Step) bool {
			if s == c.slow {
				time.Sleep(crashLease - crashLease/10) // past the margin
			}
			return true
		})
		tx, _ := slow.Begin(ctx)
		if err := transfer(tx, pa, pb, 1); err != nil {
			t.Fatal(err)
		}
		err := tx.Commit()
		if c.committed != (err == nil) || !c.committed && txn.ReasonOf(err) != txn.Timeout {
			t.Fatalf("slow at %v: commit %v", c.slow, err)
		}
		if sw, err := loader.Sweep(ctx); err != nil || sw.Live+sw.Recovered != 0 {
			t.Fatalf("slow at %v: locks left %+v %v", c.slow, sw, err)
		}
		got, err := balances(ctx, loader, pa, pb)
		if err != nil || (got[0] == 99) != c.committed || got[0]+got[1] != 200 {
			t.Fatalf("slow at %v: %v %v", c.slow, got, err)
		}
	}
}

// TestLockedOnlyRecovered: a transaction that locked a record it did not
// write (an Insert of an existing key) and died after its log: recovery
// rolls its writes forward and releases that lock too.
func TestLockedOnlyRecovered(t *testing.T) {
	b := crashBed(t)
	ctx := tctx(t)
	loader, pa, pb := b.loadedPair(t, ctx)
	victim := b.leased(func(s ford.Step) bool { return s != ford.StepLogged })
	tx, _ := victim.Begin(ctx)
	if err := tx.Insert(pb, []byte("x")); !errors.Is(err, txn.ErrExists) {
		t.Fatal(err)
	}
	if err := tx.Put(pa, []byte("50")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, ford.ErrStopped) {
		t.Fatal(err)
	}
	ford.Kill(victim)
	time.Sleep(crashLease + 20*time.Millisecond)
	if _, err := loader.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if sw, err := loader.Sweep(ctx); err != nil || sw.Live+sw.Recovered != 0 {
		t.Fatalf("locks left: %+v %v", sw, err)
	}
	if got, err := balances(ctx, loader, pa, pb); err != nil || got[0] != 50 || got[1] != 100 {
		t.Fatalf("%v %v, want 50 and 100", got, err)
	}
}
