package farm_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// nodeRole is a memory node process: its argument is "INDEX|MEMBERS"
// (MEMBERS the membership addresses, comma-separated). It serves FaRM
// over tcp with the membership on, says "ready CM-ADDRESS", and runs
// until its stdin closes or it is killed.
const nodeRole = "farm-node"

func init() {
	remotedev.Role(nodeRole, func(arg string) int {
		f := strings.SplitN(arg, "|", 2)
		if len(f) != 2 {
			fmt.Fprintln(os.Stderr, nodeRole+": bad argument", arg)
			return 2
		}
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0", Token: "tok",
			Probe: 100 * time.Millisecond,
			NewService: farm.Service(farm.NodeConfig{Lease: 200 * time.Millisecond, LogSize: 1 << 20, MaxClients: 16,
				Members: strings.Split(f[1], ","), Silence: 300 * time.Millisecond, Token: "tok", Logger: slog.New(slog.DiscardHandler)}, nil),
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Fprintln(os.Stderr, nodeRole+":", err)
			return 1
		}
		fmt.Println("ready", srv.Info().CM)
		var b [1]byte
		os.Stdin.Read(b[:]) // until the test closes it
		srv.Close()
		return 0
	})
}

// TestPrimaryFailoverTCP kills (-9) the process of a primary memory
// node over tcp while transfers run: its first backup takes over, the
// transfers go on, nothing acknowledged before the kill is lost, and
// the money adds up (and the history is serializable when no transfer
// was left in doubt: the nodes that would say how recovery decided them
// are other processes). FARM_FAILOVER_TCP=1 runs it.
func TestPrimaryFailoverTCP(t *testing.T) {
	if os.Getenv("FARM_FAILOVER_TCP") == "" {
		t.Skip("FARM_FAILOVER_TCP=1 runs it (starts processes)")
	}
	lns, members := listeners(t, 3)
	for _, ln := range lns {
		ln.Close() // the children listen there
	}
	b := &bed{t: t}
	var children []*remotedev.Child
	for i := range 3 {
		child, err := remotedev.StartChild(nodeRole, strconv.Itoa(i)+"|"+strings.Join(members, ","))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { child.CloseInput(); child.Process().Kill(); <-child.Exited() })
		f, err := child.Expect("ready")
		if err != nil {
			t.Fatal(err)
		}
		b.addrs = append(b.addrs, f[0])
		children = append(children, child)
	}
	b.layout = farm.Layout{Nodes: b.addrs, Buckets: 1024, ValueSize: 256}
	db := b.dbWith(farm.Config{Device: "tcp://127.0.0.1:0?token=tok", Nodes: b.addrs, Token: "tok"})
	ctx := tctx(t)
	k := &bank{t: t, b: b, h: check.NewHistory(), accounts: 24}
	acked := &ackedVersions{v: map[string]uint64{}}
	k.load(db)
	work, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 2 {
		wg.Go(func() {
			for work.Err() == nil {
				a, c := (i*7+int(k.commits.Load()))%k.accounts, (i*5+int(k.commits.Load())+1)%k.accounts
				if a == c {
					continue
				}
				var last txn.Tx
				err := txn.Run(work, db, func(tx txn.Tx) error { last = tx; return transfer(tx, acct(a), acct(c), 1) })
				switch {
				case err == nil:
					r, w := last.(txn.Traced).Trace()
					k.h.Add(r, w)
					acked.add(w)
					k.commits.Add(1)
				case work.Err() == nil:
					mu.Lock()
					k.inDoubt = append(k.inDoubt, last.(*farm.Tx))
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	before := k.commits.Load()
	ackedBefore := acked.snapshot()
	if err := children[0].Process().Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for k.commits.Load() < before+50 {
		if time.Since(killed) > settleBound {
			if os.Getenv("FARM_DUMP") != "" {
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			}
			t.Fatalf("%d transfers committed in %v after the kill; %s", k.commits.Load()-before, settleBound, farm.ConnState(db))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("transfers commit again %v after the kill", time.Since(killed).Round(time.Millisecond))
	stop()
	wg.Wait()
	if c, err := db.Configuration(ctx); err != nil || c.Epoch != 2 || !c.Out[0] || c.Primaries[0] != 1 {
		t.Fatalf("configuration %+v, %v", c, err)
	}
	var last txn.Tx
	if err := txn.Run(ctx, db, func(tx txn.Tx) error {
		last = tx
		for key := range ackedBefore {
			if _, err := tx.Get([]byte(key)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	reads, _ := last.(txn.Traced).Trace()
	final := map[string]uint64{}
	for _, a := range reads {
		final[a.Key] = a.Version
	}
	for key, v := range ackedBefore {
		if final[key] < v {
			t.Fatalf("key %s: version %d now, %d acknowledged before the kill", key, final[key], v)
		}
	}
	if got, want := k.total(db), initial*k.accounts; got != want {
		t.Fatalf("money: %d, want %d", got, want)
	}
	if len(k.inDoubt) == 0 {
		if err := k.h.Check(); err != nil {
			t.Fatalf("%d transactions: %v", k.h.Len(), err)
		}
	}
	t.Logf("%d transfers, %d in doubt", k.commits.Load(), len(k.inDoubt))
}
