package farm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// bank is accounts over the shards, transfers between them by workers
// that trace every committed transaction.
type bank struct {
	t        *testing.T
	b        *bed
	h        *check.History
	accounts int
	commits  atomic.Int64
	mu       sync.Mutex
	inDoubt  []*farm.Tx // Commit returned ErrUnreachable: recovery decided
	hide     string     // keys with this prefix stay out of the history
}

// add records a committed transaction's trace, without the hidden keys.
func (k *bank) add(reads, writes []txn.Access) {
	if k.hide != "" {
		reads, writes = k.without(reads), k.without(writes)
	}
	k.h.Add(reads, writes)
}

func (k *bank) without(as []txn.Access) []txn.Access {
	var out []txn.Access
	for _, a := range as {
		if !strings.HasPrefix(a.Key, k.hide) {
			out = append(out, a)
		}
	}
	return out
}

const initial = 100

func acct(i int) []byte { return []byte(fmt.Sprintf("acct/%d", i)) }

// load creates the accounts.
func (k *bank) load(db *farm.DB) {
	ctx := tctx(k.t)
	for i := 0; i < k.accounts; i += 8 {
		tx, _ := db.Begin(ctx)
		for j := i; j < min(i+8, k.accounts); j++ {
			if err := tx.Put(acct(j), []byte(strconv.Itoa(initial))); err != nil {
				k.t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			k.t.Fatal(err)
		}
		k.add(tx.(txn.Traced).Trace())
	}
}

// transfer moves amount from account a to b in tx.
func transfer(tx txn.Tx, a, b []byte, amount int) error {
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
	if err := tx.Put(a, []byte(strconv.Itoa(x-amount))); err != nil {
		return err
	}
	return tx.Put(b, []byte(strconv.Itoa(y+amount)))
}

// work runs transfers on db until ctx ends.
func (k *bank) work(ctx context.Context, db *farm.DB, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	for ctx.Err() == nil {
		a, b := rng.IntN(k.accounts), rng.IntN(k.accounts)
		if a == b {
			continue
		}
		var last txn.Tx
		err := txn.Run(ctx, db, func(tx txn.Tx) error {
			last = tx
			return transfer(tx, acct(a), acct(b), 1+rng.IntN(5))
		})
		switch {
		case err == nil:
			k.add(last.(txn.Traced).Trace())
			k.commits.Add(1)
		case errors.Is(err, txn.ErrUnreachable):
			// Its connection was fenced (a lock older than the lease, on
			// a loaded machine): recovery decides; resolved at the end.
			k.mu.Lock()
			k.inDoubt = append(k.inDoubt, last.(*farm.Tx))
			k.mu.Unlock()
		case ctx.Err() != nil:
			return
		default:
			k.t.Errorf("a worker's transfer: %v", err)
			return
		}
	}
}

// total reads every account and returns the sum.
func (k *bank) total(db *farm.DB, extra ...[]byte) int {
	ctx := tctx(k.t)
	sum := 0
	var last txn.Tx
	if err := txn.Run(ctx, db, func(tx txn.Tx) error {
		last, sum = tx, 0
		for i := range k.accounts {
			v, err := tx.Get(acct(i))
			if err != nil {
				return err
			}
			x, _ := strconv.Atoi(string(v))
			sum += x
		}
		for _, key := range extra {
			v, err := tx.Get(key)
			if err != nil {
				return err
			}
			x, _ := strconv.Atoi(string(v))
			sum += x
		}
		return nil
	}); err != nil {
		k.t.Fatal(err)
	}
	k.add(last.(txn.Traced).Trace())
	return sum
}

// onShards returns two private keys on different shards for round r.
func onShards(r, shards int) (a, b []byte) {
	a = []byte(fmt.Sprintf("victim/%d/a", r))
	for i := 0; ; i++ {
		b = []byte(fmt.Sprintf("victim/%d/b%d", r, i))
		if txn.Shard(a, shards) != txn.Shard(b, shards) {
			return a, b
		}
	}
}

// TestStoppedCoordinator stops a coordinator at every step of its commit,
// again and again, while workers keep transferring: the coordinator
// either stays connected (its locks outlive the lease, and the primaries
// recover its transaction) or closes (the nodes see it gone and recover
// at once). No lock outlives the lease by more than recovery takes, the
// stopped transaction is applied whole or not at all (the money adds
// up, at primaries and at backups alike), the workers commit throughout,
// and the history is serializable.
func TestStoppedCoordinator(t *testing.T) {
	const lease = 200 * time.Millisecond
	b := newBed(t, 3, lease)
	k := &bank{t: t, b: b, h: check.NewHistory(), accounts: 24}
	loader := b.db()
	k.load(loader)
	ctx, stop := context.WithCancel(tctx(t))
	var wg sync.WaitGroup
	var workers []*farm.DB
	for w := range 3 {
		db := b.db()
		workers = append(workers, db)
		wg.Go(func() { k.work(ctx, db, uint64(w)) })
	}
	steps := []farm.Step{farm.StepLocked, farm.StepValidated, farm.StepBackup, farm.StepBackedUp, farm.StepPrimary, farm.StepCommitted}
	reps := envInt("FARM_KILL_REPS", 2) // 2 × 12 rounds; FARM_KILL_REPS=5 runs the 60 of the acceptance
	if testing.Short() {
		reps = 1
	}
	var victims [][]byte
	round := 0
	for rep := range reps {
		for _, step := range steps {
			for _, closeIt := range []bool{false, true} {
				victims = append(victims, k.stopOne(round, step, closeIt, lease)...)
				round++
			}
		}
		t.Logf("rep %d: %d rounds, %d worker commits so far", rep, round, k.commits.Load())
	}
	stop()
	wg.Wait()
	for _, db := range workers {
		db.Close() // owed truncations go out
	}
	if got, want := k.total(loader, victims...), initial*(k.accounts+len(victims)); got != want {
		t.Fatalf("money: %d, want %d", got, want)
	}
	k.waitSettled(lease)
	k.sameCopies()
	k.resolveInDoubt()
	if err := k.h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", k.h.Len(), err)
	}
	t.Logf("%d rounds, %d worker commits, %d transactions checked", round, k.commits.Load(), k.h.Len())
}

// stopOne runs one round: a new coordinator moves 1 from a private
// account to another (on another shard) and touches a shared account,
// and is stopped at step; it stays open or closes (closeIt). It returns
// the private accounts.
func (k *bank) stopOne(r int, step farm.Step, closeIt bool, lease time.Duration) [][]byte {
	t, b := k.t, k.b
	ctx := tctx(t)
	pa, pb := onShards(r, len(b.addrs))
	setup := b.db()
	tx, _ := setup.Begin(ctx)
	tx.Put(pa, []byte(strconv.Itoa(initial)))
	tx.Put(pb, []byte(strconv.Itoa(initial)))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	k.add(tx.(txn.Traced).Trace())
	victim := b.db()
	var hits atomic.Int32
	farm.SetHook(victim, func(s farm.Step) bool { return s != step || hits.Add(1) > 1 })
	var vt *farm.Tx
	for {
		tx, _ := victim.Begin(ctx)
		vt = tx.(*farm.Tx)
		err := transfer(tx, pa, pb, 1)
		if err == nil {
			err = transfer(tx, acct(r%k.accounts), acct((r+7)%k.accounts), 0)
		}
		if err == nil {
			err = tx.Commit()
		}
		if errors.Is(err, farm.ErrStopped) {
			break
		}
		if err == nil {
			t.Fatalf("round %d: the victim committed past step %d", r, step)
		}
		if !errors.Is(err, txn.ErrAborted) {
			t.Fatalf("round %d: %v", r, err)
		}
		hits.Store(0)
	}
	before := k.commits.Load()
	if closeIt {
		victim.Close()
	}
	// Recovery releases the stopped coordinator's locks: once the lease
	// ran out (it stays connected) or at once (it closed).
	stopped := time.Now()
	deadline := stopped.Add(settleBound)
	for k.victimLocks(victim) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("round %d (step %d, closed %v): locks held %v after the coordinator stopped", r, step, closeIt, settleBound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if held := time.Since(stopped); !closeIt && step < farm.StepCommitted && held < lease/2 {
		t.Fatalf("round %d: a live coordinator's locks recovered after %v, before the lease (%v)", r, held, lease)
	}
	// The others keep committing (a liveness check: within a bound that a
	// loaded machine meets, not a rate).
	for wait := time.Now().Add(settleBound); k.commits.Load() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("round %d: the workers committed nothing in %v after the coordinator stopped", r, settleBound)
		}
	}
	// All or nothing: the private accounts hold 100/100 or 99/101.
	var va, vb []byte
	check := setup
	txr, _ := check.Begin(ctx)
	va, err1 := txr.Get(pa)
	vb, err2 := txr.Get(pb)
	if err1 != nil || err2 != nil {
		t.Fatalf("round %d: %v %v", r, err1, err2)
	}
	committed := string(va) == "99" && string(vb) == "101"
	if !committed && !(string(va) == "100" && string(vb) == "100") {
		t.Fatalf("round %d (step %d): half applied: %s / %s", r, step, va, vb)
	}
	if committed {
		k.add(farm.InDoubtTrace(vt))
	}
	if step >= farm.StepBackedUp && !committed {
		t.Fatalf("round %d: every backup held the records (step %d) and recovery aborted", r, step)
	}
	if step <= farm.StepValidated && committed {
		t.Fatalf("round %d: no backup held a record (step %d) and recovery committed", r, step)
	}
	txr.Abort()
	setup.Close()
	if !closeIt {
		// The coordinator lives on: once it reconnected (its connections
		// were fenced if recovery ran), it commits again.
		farm.SetHook(victim, nil)
		var again txn.Tx
		if err := txn.Run(ctx, victim, func(tx txn.Tx) error { again = tx; return transfer(tx, pa, pb, 0) }); err != nil {
			t.Fatalf("round %d: the stopped coordinator cannot commit again: %v", r, err)
		}
		k.add(again.(txn.Traced).Trace())
		victim.Close()
	}
	return [][]byte{pa, pb}
}

// settleBound bounds how long recovery may take on a loaded machine
// (it takes a lease and a few round trips; the test only checks that it
// happens: timing decides no test).
const settleBound = 10 * time.Second

// victimLocks is the locks db's transactions hold at all nodes.
func (k *bank) victimLocks(db *farm.DB) int {
	n := 0
	for _, nd := range k.b.nodes {
		n += nd.LocksOf(farm.ClientID(db))
	}
	return n
}

// waitSettled waits until no node holds locks or backup records.
func (k *bank) waitSettled(lease time.Duration) {
	deadline := time.Now().Add(10 * lease * 5)
	for {
		busy := 0
		for _, nd := range k.b.nodes {
			s := nd.Stats()
			busy += s.Locks + s.Pending
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			for i, nd := range k.b.nodes {
				k.t.Logf("node %d: %+v", i, nd.Stats())
			}
			k.t.Fatal("nodes still hold locks or backup records")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameCopies checks every backup copy holds what its primary does.
func (k *bank) sameCopies() {
	nodes := k.b.nodes
	for s := range nodes {
		prim := nodes[s].CopyOf(s)
		for i := 1; i <= k.b.layout.F || (k.b.layout.F == 0 && i == 1); i++ {
			back := nodes[(s+i)%len(nodes)].CopyOf(s)
			if len(back) != len(prim) {
				k.t.Fatalf("shard %d: %d objects at the primary, %d at backup %d", s, len(prim), len(back), (s+i)%len(nodes))
			}
			for key, v := range prim {
				if back[key] != v {
					k.t.Fatalf("shard %d key %s: %q at the primary, %q at a backup", s, key, v, back[key])
				}
			}
		}
	}
}

// resolveInDoubt adds to the history the workers' transactions whose
// Commit returned ErrUnreachable and that recovery committed (a backup
// applied them).
func (k *bank) resolveInDoubt() {
	committed := 0
	for _, tx := range k.inDoubt {
		client, seq := farm.TxID(tx)
		for _, n := range k.b.nodes {
			if n.Applied(client, seq) {
				k.add(farm.InDoubtTrace(tx))
				committed++
				break
			}
		}
	}
	k.t.Logf("%d worker transactions in doubt, %d of them committed by recovery", len(k.inDoubt), committed)
}

// envInt is the integer in environment variable name, def when unset.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
