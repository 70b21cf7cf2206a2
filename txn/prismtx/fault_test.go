package prismtx_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// TestStoppedClients stops committing clients (their goroutine held in
// the test hook, connections open: dead to everyone else) after prepare,
// after the commit decision and half-way through installation, 51 times,
// ten at a time, while four healthy clients keep transferring between
// the same accounts. Each victim's transaction is a transfer plus a
// marker key of its own, on three nodes (spread). Checked:
//
//   - the healthy clients keep committing, and no transfer of theirs
//     waits for a victim's key much longer than the lease;
//   - the victims' markers: absent for those stopped before the
//     decision (resolvers aborted them), present for those stopped after
//     it (resolvers rolled them forward) — nothing half-applied, and the
//     total of the accounts is what it was;
//   - released at the end (slow, not dead), each victim's Commit agrees:
//     the lease lost before the decision, committed after it.
func TestStoppedClients(t *testing.T) {
	lease := 100 * time.Millisecond
	if raceEnabled {
		lease = 500 * time.Millisecond // commits take ten times as long
	}
	const accounts, initial, rounds, perRound = 12, 1000, 17, 3
	b := newBed(t, 3)
	cfg := func() prismtx.Config { c := b.config(); c.Lease = lease; return c }
	var healthy []*prismtx.DB
	for range 4 {
		healthy = append(healthy, b.dial(cfg()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := check.NewHistory()
	err := txn.Run(ctx, traced{healthy[0], h}, func(tx txn.Tx) error {
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

	// The victims: a DB each, stopped at its point.
	var vmu sync.Mutex
	stopAt := map[*prismtx.DB]string{}
	reached := map[*prismtx.DB]bool{}
	release := make(chan struct{})
	stopped := make(chan *prismtx.DB, rounds*perRound)
	prismtx.SetHook(func(point string, db *prismtx.DB) {
		vmu.Lock()
		want, ok := stopAt[db]
		vmu.Unlock()
		if ok && want == point {
			vmu.Lock()
			reached[db] = true
			vmu.Unlock()
			stopped <- db
			<-release
		}
	})
	t.Cleanup(func() { prismtx.SetHook(nil) })
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	// The healthy clients transfer until the victims are done.
	var stop atomic.Bool
	var commits, slowest atomic.Int64
	var wg sync.WaitGroup
	for ci, db := range healthy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				from, to := (ci*7+i*3)%accounts, (ci*5+i*11+1)%accounts
				if from == to {
					to = (to + 1) % accounts
				}
				t0 := time.Now()
				if err := tracedTransfer(ctx, db, from, to, 1, h); err != nil {
					t.Error(err)
					return
				}
				commits.Add(1)
				if d := int64(time.Since(t0)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		}()
	}

	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	points := []string{prismtx.HookPrepared, prismtx.HookDecided, prismtx.HookInstalling}
	type victim struct {
		db     *prismtx.DB
		point  string
		marker string
		err    chan error
		err2   error
		tx     txn.Tx // the attempt that stopped
	}
	var victims []*victim
	for r := range rounds {
		before := commits.Load()
		var round []*victim
		for j := range perRound {
			from, to, marker := spread(accounts, r*perRound+j, fmt.Sprintf("victim/%d/%d", r, j))
			v := &victim{db: b.dial(cfg()), point: points[j], marker: marker, err: make(chan error, 1)}
			// Before its Close (cleanups run last first), which waits for
			// its Commit.
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
			vmu.Lock()
			stopAt[v.db] = v.point
			vmu.Unlock()
			go func() {
				// Again while it aborts before its stop; the outcome of
				// the attempt that stopped is the victim's.
				for {
					tx, err := v.db.Begin(ctx)
					if err == nil {
						v.tx = tx
						err = transferIn(tx, from, to, 7, v.marker)
					}
					if err == nil {
						err = tx.Commit()
					}
					vmu.Lock()
					done := reached[v.db]
					vmu.Unlock()
					if done || !errors.Is(err, txn.ErrAborted) || ctx.Err() != nil {
						v.err <- err
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			// (A victim stopped while installing in the background has
			// returned from Commit already.)
			select {
			case <-stopped:
			case <-ctx.Done():
				t.Fatal("victim never reached its stop")
			}
			round = append(round, v)
		}
		victims = append(victims, round...)
		// After the lease, the markers tell what the victims' transactions
		// became (reading one resolves it).
		time.Sleep(lease + lease/2)
		for _, v := range round {
			var found bool
			err := txn.Run(ctx, healthy[0], func(tx txn.Tx) error {
				_, err := tx.Get([]byte(v.marker))
				found = err == nil
				if errors.Is(err, txn.ErrNotFound) {
					err = nil
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := v.point != prismtx.HookPrepared; found != want {
				t.Fatalf("victim stopped at %s: marker present %v, want %v", v.point, found, want)
			}
		}
		if commits.Load() == before {
			t.Fatalf("round %d: the healthy clients committed nothing while the victims were stopped", r)
		}
	}
	stop.Store(true)
	wg.Wait()
	sum := total(t, healthy[0], accounts)
	releaseOnce.Do(func() { close(release) })
	for _, v := range victims {
		if v.err2 = <-v.err; v.err2 == nil {
			h.Add(v.tx.(txn.Traced).Trace())
		}
	}
	if err := h.Check(); err != nil {
		t.Errorf("%d transactions: %v", h.Len(), err)
		var ce *check.CycleError
		if errors.As(err, &ce) {
			txns := h.Txns()
			for _, i := range ce.Txns() {
				t.Logf("T%d: reads %+v writes %+v", i, txns[i].Reads, txns[i].Writes)
			}
		}
	}
	if sum != accounts*initial {
		t.Fatalf("total %d, want %d: a transfer was half-applied", sum, accounts*initial)
	}
	if d := time.Duration(slowest.Load()); d > lease+2*time.Second {
		t.Errorf("a healthy transfer took %v, lease %v", d, lease)
	}
	for _, v := range victims {
		err := v.err2
		switch {
		case v.point == prismtx.HookPrepared && txn.ReasonOf(err) != txn.Timeout:
			t.Errorf("victim stopped at %s, released: %v, want a timeout abort", v.point, err)
		case v.point != prismtx.HookPrepared && err != nil:
			t.Errorf("victim stopped at %s, released: %v, want committed", v.point, err)
		}
	}
	var resolved uint64
	for _, db := range healthy {
		resolved += db.Stats().Resolved
	}
	t.Logf("%d victims; %d healthy commits; %d prepared timestamps resolved; slowest healthy transfer %v",
		len(victims), commits.Load(), resolved, time.Duration(slowest.Load()))
}

// transferIn is a transfer in tx, plus a marker key.
func transferIn(tx txn.Tx, from, to int, amount uint64, marker string) error {
	a, err := tx.Get(acct(from))
	if err != nil {
		return err
	}
	b, err := tx.Get(acct(to))
	if err != nil {
		return err
	}
	if err := tx.Put(acct(from), u64(le(a)-amount)); err != nil {
		return err
	}
	if err := tx.Put(acct(to), u64(le(b)+amount)); err != nil {
		return err
	}
	return tx.Put([]byte(marker), []byte("1"))
}

// spread picks, from seed i, two accounts and a marker key (name plus a
// suffix) on three different shards of three: a victim's transaction
// then has writes left to install on two nodes after its decision list.
func spread(accounts, i int, name string) (from, to int, marker string) {
	shard := func(k []byte) int { return txn.Shard(k, 3) }
	for d := 0; ; d++ {
		from, to = (i+d)%accounts, (i+d*7+5)%accounts
		if shard(acct(from)) == shard(acct(to)) {
			continue
		}
		for m := 0; m < 16; m++ {
			marker = fmt.Sprintf("%s.%d", name, m)
			if s := shard([]byte(marker)); s != shard(acct(from)) && s != shard(acct(to)) {
				return from, to, marker
			}
		}
	}
}
