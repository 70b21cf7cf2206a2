package ford_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/workload"
)

// Leases of the failover tests: a node silent for failSilence
// (norace_test.go, race_test.go) is taken out; the new epoch is used
// failConfigLease + failLease + 2 skews after.
const (
	failConfigLease = 100 * time.Millisecond
	failLease       = 200 * time.Millisecond
	// failoverBound bounds the time from a kill to the first commit
	// under the new epoch: the silence, raft's proposal, the hold, and
	// ample slack for -race on a loaded 2-core machine.
	failoverBound = 5 * time.Second
)

// fbed is n FORD nodes with a membership, on a loop fabric of their own.
type fbed struct {
	t       testing.TB
	fabric  string
	nodes   []*ford.Node
	addrs   []string // cm addresses
	members []string // membership addresses
	clients atomic.Int64
}

// newFailoverBed starts n nodes of smallLayout that run a membership.
func newFailoverBed(t testing.TB, n int) *fbed {
	t.Helper()
	b := &fbed{t: t, fabric: fmt.Sprintf("ford-failover-%d", seq.Add(1))}
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		b.members = append(b.members, ln.Addr().String())
	}
	for i := range n {
		nd, err := ford.StartNode(context.Background(), ford.NodeConfig{
			Server: memnode.Config{Device: fmt.Sprintf("loop://%s/n%d", b.fabric, i), CM: "127.0.0.1:0", Token: "tok",
				Logger: slog.New(slog.DiscardHandler)},
			Layout: smallLayout, Self: i, Members: b.members, MemberListener: lns[i],
			Silence: failSilence, ConfigLease: failConfigLease, Lease: failLease, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		b.nodes = append(b.nodes, nd)
		b.addrs = append(b.addrs, nd.Server().Info().CM)
	}
	return b
}

// config is a new client's configuration.
func (b *fbed) config() ford.Config {
	return ford.Config{Device: fmt.Sprintf("loop://%s/c%d", b.fabric, b.clients.Add(1)), Nodes: b.addrs, Members: b.members,
		Token: "tok", Layout: smallLayout, Lease: failLease}
}

func (b *fbed) dbWith(cfg ford.Config) *ford.DB {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := ford.Dial(ctx, cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { db.Close() })
	return db
}

func (b *fbed) db() *ford.DB { return b.dbWith(b.config()) }

// kill crashes node i: its NIC dies on the fabric, its member falls
// silent, the rest of its process goes too.
func (b *fbed) kill(i int) {
	b.t.Helper()
	if err := loop.Get(b.fabric).Kill(fmt.Sprintf("n%d", i)); err != nil {
		b.t.Fatal(err)
	}
	b.nodes[i].StopMembership()
	go b.nodes[i].Close()
}

// waitEpoch waits until node i applied epoch e.
func (b *fbed) waitEpoch(ctx context.Context, i int, e uint64) ford.Configuration {
	b.t.Helper()
	c, err := b.nodes[i].Wait(ctx, e)
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// TestFailoverConfiguration: clients learn epoch 1 from the membership;
// once node 0 is killed the membership takes it out and promotes node 1
// for shard 0, and a client routes by epoch 2.
func TestFailoverConfiguration(t *testing.T) {
	b := newFailoverBed(t, 3)
	db := b.db()
	ctx := tctx(t)
	if c := db.Configuration(); c.Epoch != 1 || c.Primaries[0] != 0 {
		t.Fatalf("%+v", c)
	}
	b.kill(0)
	c := b.waitEpoch(ctx, 1, 2)
	if !c.Out[0] || c.Primaries[0] != 1 || len(c.Backups[0]) != 0 || c.Primaries[2] != 2 || len(c.Backups[2]) != 0 {
		t.Fatalf("%+v", c)
	}
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		for i := range 6 {
			if err := tx.Put(acct(i), []byte("1")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := db.Configuration(); c.Epoch != 2 {
		t.Fatalf("the client routes by %+v", c)
	}
}

// inDoubt collects transactions whose Commit's outcome is unknown.
type inDoubt struct {
	mu  sync.Mutex
	txs []*ford.Tx
}

// resolve adds to h each in-doubt transaction that committed: its first
// write's version is installed (final holds every key's version now)
// and no committed transaction installed that version instead.
func (d *inDoubt) resolve(t *testing.T, h *check.History, final map[string]uint64) {
	written := map[string]map[uint64]bool{}
	for _, tx := range h.Txns() {
		for _, w := range tx.Writes {
			if written[w.Key] == nil {
				written[w.Key] = map[uint64]bool{}
			}
			written[w.Key][w.Version] = true
		}
	}
	committed := 0
	for _, tx := range d.txs {
		reads, writes := ford.PendingTrace(tx)
		if len(writes) == 0 {
			continue
		}
		w := writes[0]
		if final[w.Key] >= w.Version && !written[w.Key][w.Version] {
			h.Add(reads, writes)
			committed++
		}
	}
	t.Logf("%d transactions in doubt, %d of them committed by recovery", len(d.txs), committed)
}

// versions reads every key of keys in one transaction: their versions.
func versions(ctx context.Context, db txn.DB, keys []string) (map[string]uint64, error) {
	out := map[string]uint64{}
	var last txn.Tx
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		last = tx
		for _, k := range keys {
			if _, err := tx.Get([]byte(k)); err != nil && !errors.Is(err, txn.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	reads, _ := last.(txn.Traced).Trace()
	for _, a := range reads {
		out[a.Key] = a.Version
	}
	return out, nil
}

// TestPrimaryFailover runs SmallBank from three clients under the
// checker, kills node 0 (the primary of shard 0, a backup of shard 2 and
// a log node) mid-run, and checks that the membership promotes node 1,
// that transactions commit again within failoverBound, that every
// commit acknowledged (before the kill or after) is in the final state,
// that the money adds up and that the history is serializable.
func TestPrimaryFailover(t *testing.T) {
	if os.Getenv("FORD_LOG") != "" {
		defer slog.SetDefault(slog.Default())
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	b := newFailoverBed(t, 3)
	ctx := tctx(t)
	failoverRun(t, ctx, []*ford.DB{b.db(), b.db(), b.db()}, func() { b.kill(0) }, func() ford.Configuration { return b.waitEpoch(ctx, 1, 2) })
}

// failoverRun runs SmallBank from dbs under the checker for 3 s, calls
// kill after 500 ms, and checks that the clients commit under epoch 2
// within failoverBound, that every acknowledged commit is in the final
// state, that the money adds up and that the history is serializable.
// out, when not nil, waits for a node's epoch 2.
func failoverRun(t *testing.T, ctx context.Context, dbs []*ford.DB, kill func(), out func() ford.Configuration) {
	h := check.NewHistory()
	acked := map[string]uint64{}
	var amu sync.Mutex
	var commits atomic.Int64
	trace := func(reads, writes []txn.Access) {
		h.Add(reads, writes)
		amu.Lock()
		for _, w := range writes {
			acked[w.Key] = max(acked[w.Key], w.Version)
		}
		amu.Unlock()
		commits.Add(1)
	}
	sb := &workload.SmallBank{Accounts: 200, HotAccounts: 20}
	if err := sb.Load(ctx, dbs[0], workload.TxnLoad{Trace: trace}); err != nil {
		t.Fatal(err)
	}
	var doubt inDoubt
	results := make([]*workload.TxnResult, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			var err error
			results[i], err = workload.RunTxnFunc(ctx, workload.TxnRun{Threads: 2, Duration: 3 * time.Second, Seed: int64(1 + 10*i)}, sb,
				func(ctx context.Context, _ *workload.TxnSession, op workload.SmallBankOp) (int64, error) {
					rec := &lastTx{DB: db}
					delta, err := sb.Exec(ctx, rec, op)
					switch {
					case err == nil:
						trace(rec.last.(txn.Traced).Trace())
					case errors.Is(err, txn.ErrUnreachable) && rec.last != nil:
						doubt.mu.Lock()
						doubt.txs = append(doubt.txs, rec.last.(*ford.Tx))
						doubt.mu.Unlock()
					}
					return delta, err
				})
			if err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	before := commits.Load()
	kill()
	killed := time.Now()
	if out != nil {
		c := out()
		t.Logf("node 0 out %v after the kill", time.Since(killed).Round(time.Millisecond))
		if !c.Out[0] || c.Primaries[0] != 1 {
			t.Fatalf("configuration after the kill: %+v", c)
		}
	}
	for dbs[0].Configuration().Epoch < 2 || commits.Load() < before+20 {
		if time.Since(killed) > failoverBound {
			t.Fatalf("%d commits in %v after the kill (epoch %d at client 0)", commits.Load()-before, failoverBound, dbs[0].Configuration().Epoch)
		}
		time.Sleep(5 * time.Millisecond)
	}
	resumed := time.Since(killed)
	wg.Wait()
	t.Logf("commits again under epoch 2 %v after the kill", resumed.Round(time.Millisecond))
	if c := dbs[0].Configuration(); !c.Out[0] || c.Primaries[0] != 1 {
		t.Fatalf("client 0 routes by %+v", c)
	}
	var unknown int64
	for i, res := range results {
		if res.Failed > 0 {
			t.Fatalf("client %d: %d failed (first: %v)", i, res.Failed, res.FirstErr)
		}
		unknown += res.Unknown
		t.Logf("client %d: %d committed, %d unknown (%v); %+v", i, res.Committed, res.Unknown, res.FirstErr, dbs[i].Stats())
	}
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	final, err := versions(ctx, dbs[1], keys)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range acked {
		if final[k] < v {
			t.Fatalf("key %q: version %d now, a commit acknowledged %d: a committed transaction was lost", k, final[k], v)
		}
	}
	doubt.resolve(t, h, final)
	err = sb.CheckMoney(ctx, dbs[1], results...)
	var me *workload.MoneyError
	if errors.As(err, &me) && me.Unknown > 0 {
		// Commits of unknown outcome (their log round failed at the
		// kill) may have committed: each moves at most a few dollars.
		if d := me.Total - me.Want; d < -me.Unknown*100_000 || d > me.Unknown*100_000 {
			t.Fatal(err)
		}
		t.Logf("SmallBank: %d transactions of unknown outcome, money off by %d", me.Unknown, me.Total-me.Want)
	} else if err != nil {
		t.Fatal(err)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", h.Len(), err)
	}
	t.Logf("%d transactions checked (%d unknown)", h.Len(), unknown)
}

// lastTx is a txn.DB that remembers the last transaction it began: the
// one whose Commit decided an operation's outcome.
type lastTx struct {
	txn.DB
	last txn.Tx
}

func (d *lastTx) Begin(ctx context.Context) (txn.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	d.last = tx
	return tx, err
}

// TestLogNodeKilled: a coordinator crashes once its log is written
// (StepLogged), then the node of its log's first copy is killed. A
// survivor recovers the transaction from the log's other copy: the
// transfer is rolled forward.
func TestLogNodeKilled(t *testing.T) {
	b := newFailoverBed(t, 3)
	ctx := tctx(t)
	loader := b.db()
	pa, pb := onShards(0, 3)
	if err := txn.Run(ctx, loader, func(tx txn.Tx) error {
		if err := tx.Put(pa, []byte(strconv.Itoa(initial))); err != nil {
			return err
		}
		return tx.Put(pb, []byte(strconv.Itoa(initial)))
	}); err != nil {
		t.Fatal(err)
	}
	cfg := b.config()
	cfg.Hook = func(s ford.Step) bool { return s != ford.StepLogged }
	victim := b.dbWith(cfg)
	var id int
	err := txn.Run(ctx, victim, func(tx txn.Tx) error {
		id = ford.CoordID(tx.(*ford.Tx))
		return transfer(tx, pa, pb, 1)
	})
	if !errors.Is(err, ford.ErrStopped) {
		t.Fatalf("commit %v, want it stopped", err)
	}
	logNode := ford.LogNode(victim, id)
	ford.Kill(victim)
	b.kill(logNode)
	b.waitEpoch(ctx, (logNode+1)%3, 2)
	survivor := b.db()
	got, err := balances(ctx, survivor, pa, pb)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != initial-1 || got[1] != initial+1 {
		t.Fatalf("balances %v after the log node's death: the logged transfer was not rolled forward", got)
	}
	if st := survivor.Stats(); st.RolledForward == 0 {
		t.Fatalf("survivor %+v: no roll-forward", st)
	}
}

// TestLogCopyCorrupt: one copy of a logged transaction's log is
// corrupt (as if the coordinator died during its log round); recovery
// finds the other and rolls the transaction forward.
func TestLogCopyCorrupt(t *testing.T) {
	b := newBed(t, 3, smallLayout)
	ctx := tctx(t)
	loader := b.leased(nil)
	pa, pb := onShards(1, 3)
	if err := txn.Run(ctx, loader, func(tx txn.Tx) error {
		if err := tx.Put(pa, []byte(strconv.Itoa(initial))); err != nil {
			return err
		}
		return tx.Put(pb, []byte(strconv.Itoa(initial)))
	}); err != nil {
		t.Fatal(err)
	}
	victim := b.leased(func(s ford.Step) bool { return s != ford.StepLogged })
	var id int
	err := txn.Run(ctx, victim, func(tx txn.Tx) error {
		id = ford.CoordID(tx.(*ford.Tx))
		return transfer(tx, pa, pb, 1)
	})
	if !errors.Is(err, ford.ErrStopped) {
		t.Fatalf("commit %v, want it stopped", err)
	}
	if err := ford.CorruptLogCopy(loader, id, 0, 40); err != nil {
		t.Fatal(err)
	}
	ford.Kill(victim)
	got, err := balances(ctx, b.leased(nil), pa, pb)
	if err != nil || got[0] != initial-1 || got[1] != initial+1 {
		t.Fatalf("balances %v (%v): want the transfer rolled forward from the whole copy", got, err)
	}
}

// TestStaleEpochCannotCommit: a client cut from the membership (its
// lease on epoch 1 not renewed) can neither commit a transaction it
// began under epoch 1 nor begin one once node 0 is out and epoch 2 is
// in use; its writes are nowhere.
func TestStaleEpochCannotCommit(t *testing.T) {
	b := newFailoverBed(t, 3)
	ctx := tctx(t)
	fresh := b.db()
	pa, pb := onShards(2, 3)
	if err := txn.Run(ctx, fresh, func(tx txn.Tx) error {
		if err := tx.Put(pa, []byte(strconv.Itoa(initial))); err != nil {
			return err
		}
		return tx.Put(pb, []byte(strconv.Itoa(initial)))
	}); err != nil {
		t.Fatal(err)
	}
	stale := b.db()
	ford.Freeze(stale)
	tx, err := stale.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Put(acct(0), []byte("stale")); err != nil {
		t.Fatal(err)
	}
	b.kill(0)
	b.waitEpoch(ctx, 1, 2)
	// The fresh client commits under epoch 2.
	if err := txn.Run(ctx, fresh, func(tx txn.Tx) error { return transfer(tx, pa, pb, 1) }); err != nil {
		t.Fatal(err)
	}
	if e := fresh.Configuration().Epoch; e != 2 {
		t.Fatalf("the fresh client routes by epoch %d", e)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("a transaction of epoch 1 committed after epoch 2 was in use")
	}
	if _, err := stale.Begin(ctx); !errors.Is(err, ford.ErrStale) {
		t.Fatalf("Begin on a stale client: %v, want ErrStale", err)
	}
	err = txn.Run(ctx, fresh, func(tx txn.Tx) error {
		_, err := tx.Get(acct(0))
		return err
	})
	if !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("the stale client's write: %v, want it absent", err)
	}
	if got, err := balances(ctx, fresh, pa, pb); err != nil || got[0] != initial-1 || got[1] != initial+1 {
		t.Fatalf("balances %v (%v)", got, err)
	}
}

// keyOn returns a key of shard s of 3.
func keyOn(prefix string, s int) []byte {
	for i := 0; ; i++ {
		if k := []byte(fmt.Sprintf("%s/%d", prefix, i)); txn.Shard(k, 3) == s {
			return k
		}
	}
}

// TestValidationNodeKilled: a transaction read a record of shard 0 and
// wrote one of shard 1 (copies on nodes 1 and 2); node 0 dies before it
// commits. Its validation round fails on node 0, before the log: nothing
// of it landed, so with a membership the commit is an abort (txn.Run
// runs it again under the next configuration), not an unknown outcome.
func TestValidationNodeKilled(t *testing.T) {
	b := newFailoverBed(t, 3)
	ctx := tctx(t)
	db := b.db()
	ra, wb := keyOn("validate/read", 0), keyOn("validate/write", 1)
	if err := txn.Run(ctx, db, func(tx txn.Tx) error {
		if err := tx.Put(ra, []byte("a")); err != nil {
			return err
		}
		return tx.Put(wb, []byte("b"))
	}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Get(ra); err != nil {
		t.Fatal(err)
	}
	if err := tx.Put(wb, []byte("b2")); err != nil {
		t.Fatal(err)
	}
	b.kill(0)
	err = tx.Commit()
	if !errors.Is(err, txn.ErrAborted) {
		t.Fatalf("commit after the read's node died: %v, want an abort", err)
	}
	b.waitEpoch(ctx, 1, 2)
	got, err := valueOf(ctx, db, wb)
	if err != nil || got != "b" {
		t.Fatalf("the aborted write's record holds %q (%v), want its old value", got, err)
	}
}

// valueOf reads key's value in a transaction of its own.
func valueOf(ctx context.Context, db txn.DB, key []byte) (string, error) {
	var v []byte
	err := txn.Run(ctx, db, func(tx txn.Tx) error {
		var err error
		v, err = tx.Get(key)
		return err
	})
	return string(v), err
}
