package farm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
	"github.com/rdmakit/rdmakit/workload"
)

// newFailoverBed starts n nodes that run a membership (Silence silence)
// on loopback TCP ports of their own.
func newFailoverBed(t *testing.T, n int, lease, silence time.Duration) *bed {
	t.Helper()
	lns, members := listeners(t, n)
	b := &bed{t: t, fabric: fmt.Sprintf("farm-failover-%d", seq.Add(1)), nodes: make([]*farm.Node, n)}
	for i := range n {
		cfg := farm.NodeConfig{Lease: lease, LogSize: 1 << 20, MaxClients: 32, Members: members, MemberListener: lns[i],
			Silence: silence, Token: "tok", Logger: testLogger()}
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + b.fabric + fmt.Sprintf("/n%d", i), CM: "127.0.0.1:0",
			Token: "tok", NewService: farm.Service(cfg, func(nd *farm.Node) { b.nodes[i] = nd }),
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.addrs = append(b.addrs, srv.Info().CM)
		b.servers = append(b.servers, srv)
	}
	b.layout = farm.Layout{Nodes: b.addrs, Buckets: 1024, ValueSize: 256}
	return b
}

// TestConfigurationRPC: a client learns the configuration from the
// nodes, and the new one once a node is gone.
func TestConfigurationRPC(t *testing.T) {
	b := newFailoverBed(t, 3, 200*time.Millisecond, 200*time.Millisecond)
	cfg := b.config()
	cfg.Token = "tok"
	db := b.dbWith(cfg)
	ctx := tctx(t)
	c, err := db.Configuration(ctx)
	if err != nil || c.Epoch != 1 || c.Primaries[0] != 0 {
		t.Fatalf("%+v, %v", c, err)
	}
	b.servers[0].Close()
	for {
		c, err = db.Configuration(ctx)
		if err == nil && c.Epoch == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no epoch 2: %+v, %v", c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !c.Out[0] || c.Primaries[0] != 1 || len(c.Backups[0]) != 0 || len(c.Backups[2]) != 0 {
		t.Fatalf("%+v", c)
	}
	if nc, ok := b.nodes[2].Configuration(); !ok || nc.Epoch != 2 {
		t.Fatalf("node 2: %+v %v", nc, ok)
	}
}

// TestNoMembership: nodes without members answer ErrNoMembership.
func TestNoMembership(t *testing.T) {
	b := newBed(t, 3, 0)
	db := b.db()
	if _, err := db.Configuration(tctx(t)); !errors.Is(err, farm.ErrNoMembership) {
		t.Fatalf("err %v, want ErrNoMembership", err)
	}
	if _, ok := b.nodes[0].Configuration(); ok {
		t.Fatal("a node without members has a configuration")
	}
}

// testLogger logs at FARM_LOG's level (debug, info, warn) to stderr,
// nothing when unset.
func testLogger() *slog.Logger {
	var l slog.Level
	if l.UnmarshalText([]byte(os.Getenv("FARM_LOG"))) != nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// TestPrimaryFailover runs SmallBank and zero-sum transfers over three
// nodes, kills node 0 (its NIC crashes on the loop fabric and its
// membership member falls silent), and checks that the membership
// promotes node 1 for shard 0, that transactions commit again after the
// promotion, that nothing acknowledged before the kill is lost (every
// key's version is at least the newest acknowledged one, and the money
// adds up), and that the history is serializable.
func TestPrimaryFailover(t *testing.T) {
	const lease = 200 * time.Millisecond
	if os.Getenv("FARM_LOG") != "" {
		defer slog.SetDefault(slog.Default())
		slog.SetDefault(testLogger())
	}
	b := newFailoverBed(t, 3, lease, 300*time.Millisecond)
	cfg := b.config()
	cfg.Token = "tok"
	db := b.dbWith(cfg)
	ctx := tctx(t)
	k := &bank{t: t, b: b, h: check.NewHistory(), accounts: 24}
	acked := &ackedVersions{v: map[string]uint64{}}
	trace := func(reads, writes []txn.Access) { k.h.Add(reads, writes); acked.add(writes) }
	k.load(db)
	sb := &workload.SmallBank{Accounts: 200, HotAccounts: 20}
	if err := sb.Load(ctx, db, workload.TxnLoad{Trace: trace}); err != nil {
		t.Fatal(err)
	}
	work, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { k.work(work, db, uint64(i)) })
	}
	var res *workload.TxnResult
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		var err error
		res, err = workload.RunTxnFunc(work, workload.TxnRun{Threads: 2, Duration: 2 * time.Second, Seed: 1}, sb,
			func(ctx context.Context, _ *workload.TxnSession, op workload.SmallBankOp) (int64, error) {
				rec := &lastTx{DB: db}
				delta, err := sb.Exec(ctx, rec, op)
				switch {
				case err == nil:
					if tr, ok := rec.last.(txn.Traced); ok {
						trace(tr.Trace())
					}
				case errors.Is(err, txn.ErrUnreachable):
					k.mu.Lock()
					k.inDoubt = append(k.inDoubt, rec.last.(*farm.Tx))
					k.mu.Unlock()
				}
				return delta, err
			})
		if err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	before := k.commits.Load()
	ackedBefore := acked.snapshot()
	if err := loop.Get(b.fabric).Kill("n0"); err != nil {
		t.Fatal(err)
	}
	b.nodes[0].Membership().Close()
	go b.servers[0].Close() // the rest of the process dies too
	killed := time.Now()
	c, err := b.nodes[1].Membership().Wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Out[0] || c.Primaries[0] != 1 {
		t.Fatalf("configuration after the kill: %+v", c)
	}
	for k.commits.Load() < before+20 {
		if time.Since(killed) > settleBound {
			for i, nd := range b.nodes {
				t.Logf("node %d: %+v", i, nd.Stats())
			}
			t.Logf("client: %+v; %s", db.Stats(), farm.ConnState(db))
			if os.Getenv("FARM_DUMP") != "" {
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			}
			for i := range 5 {
				tx, _ := db.Begin(ctx)
				err := transfer(tx, acct(i), acct(i+1), 1)
				if err == nil {
					err = tx.Commit()
				}
				t.Logf("a transfer: %v", err)
			}
			t.Fatalf("%d transfers committed in %v after the kill", k.commits.Load()-before, settleBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("transfers commit again %v after the kill", time.Since(killed).Round(time.Millisecond))
	<-ran
	stop()
	wg.Wait()
	// Every key's newest version now is at least the newest one a
	// commit acknowledged before the kill wrote.
	final := map[string]uint64{}
	var last txn.Tx
	if err := txn.Run(ctx, db, func(tx txn.Tx) error {
		last = tx
		for key := range ackedBefore {
			if _, err := tx.Get([]byte(key)); err != nil && !errors.Is(err, txn.ErrNotFound) {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	reads, _ := last.(txn.Traced).Trace()
	for _, a := range reads {
		final[a.Key] = a.Version
	}
	for key, v := range ackedBefore {
		if final[key] < v {
			t.Fatalf("key %s: version %d now, %d acknowledged before the kill", key, final[key], v)
		}
	}
	if got, want := k.total(db), initial*k.accounts; got != want {
		t.Fatalf("transfers' money: %d, want %d", got, want)
	}
	if res.Failed > 0 {
		t.Fatalf("SmallBank: %d failed (first: %v)", res.Failed, res.FirstErr)
	}
	err = sb.CheckMoney(ctx, db, res)
	var me *workload.MoneyError
	if errors.As(err, &me) && me.Unknown > 0 {
		// Transactions whose Commit returned ErrUnreachable at the kill
		// may have committed or not: each moves at most a few dollars.
		if d := me.Total - me.Want; d < -int64(me.Unknown)*100_000 || d > int64(me.Unknown)*100_000 {
			t.Fatal(err)
		}
		t.Logf("SmallBank: %d transactions of unknown outcome, money off by %d", me.Unknown, me.Total-me.Want)
	} else if err != nil {
		t.Fatal(err)
	}
	k.resolveInDoubt()
	if err := k.h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", k.h.Len(), err)
	}
	t.Logf("%d transfers, %d SmallBank transactions (%d unknown); %d in the history", k.commits.Load(), res.Committed, res.Unknown, k.h.Len())
}

// ackedVersions is the newest version of each key an acknowledged
// commit wrote.
type ackedVersions struct {
	mu sync.Mutex
	v  map[string]uint64
}

func (a *ackedVersions) add(writes []txn.Access) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range writes {
		a.v[w.Key] = max(a.v[w.Key], w.Version)
	}
}

func (a *ackedVersions) snapshot() map[string]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.v)
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
