package farm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/check"
	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// clientRole is a coordinator process: its argument is "STEP|ROUND|NODES"
// (NODES comma-separated cm addresses). It moves 1 between round
// ROUND's private accounts (onShards) over tcp, stops its commit at
// STEP, says "stopped", and waits there until it is killed.
const clientRole = "farm-client"

func init() {
	remotedev.Role(clientRole, func(arg string) int {
		f := strings.SplitN(arg, "|", 3)
		if len(f) != 3 {
			fmt.Fprintln(os.Stderr, clientRole+": bad argument", arg)
			return 2
		}
		step, _ := strconv.Atoi(f[0])
		round, _ := strconv.Atoi(f[1])
		nodes := strings.Split(f[2], ",")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		db, err := farm.Dial(ctx, farm.Config{Device: "tcp://127.0.0.1:0", Nodes: nodes})
		if err != nil {
			fmt.Fprintln(os.Stderr, clientRole+":", err)
			return 1
		}
		var once sync.Once
		farm.SetHook(db, func(s farm.Step) bool {
			if s == farm.Step(step) {
				once.Do(func() { fmt.Println("stopped") })
				select {} // killed here
			}
			return true
		})
		pa, pb := onShards(round, len(nodes))
		for {
			err := txn.Run(ctx, db, func(tx txn.Tx) error { return transfer(tx, pa, pb, 1) })
			if err != nil && !errors.Is(err, txn.ErrAborted) {
				fmt.Fprintln(os.Stderr, clientRole+":", err)
				return 1
			}
			if err == nil {
				fmt.Println("committed") // past the step: not expected
				return 1
			}
		}
	})
}

// TestKilledClientTCP kills (-9) a coordinator process at every step of
// its commit (FARM_TCP_KILLS times each, default 1), over tcp, while a worker keeps transferring: the nodes
// recover each transaction whole or not at all, release its locks, and
// the history and the money check out.
func TestKilledClientTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const lease = 200 * time.Millisecond
	b := &bed{t: t, nodes: make([]*farm.Node, 3)}
	for i := range 3 {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			Probe:      100 * time.Millisecond,
			NewService: farm.Service(farm.NodeConfig{Lease: lease, LogSize: 1 << 20, MaxClients: 16}, func(nd *farm.Node) { b.nodes[i] = nd }),
			Logger:     slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		b.addrs = append(b.addrs, srv.Info().CM)
	}
	b.layout = farm.Layout{Nodes: b.addrs, Buckets: 1024, ValueSize: 256}
	tcpDB := func() *farm.DB { return b.dbWith(farm.Config{Device: "tcp://127.0.0.1:0", Nodes: b.addrs}) }
	// The killed coordinators' transfers that recovery committed have no
	// trace (it died with them): their private accounts stay out of the
	// history; the money check covers them.
	k := &bank{t: t, b: b, h: check.NewHistory(), accounts: 12, hide: "victim/"}
	loader := tcpDB()
	k.load(loader)
	ctx, stop := context.WithCancel(tctx(t))
	var wg sync.WaitGroup
	worker := tcpDB()
	wg.Go(func() { k.work(ctx, worker, 1) })
	all := []farm.Step{farm.StepLocked, farm.StepValidated, farm.StepBackup, farm.StepBackedUp, farm.StepPrimary, farm.StepCommitted}
	var steps []farm.Step
	for range envInt("FARM_TCP_KILLS", 1) { // FARM_TCP_KILLS=9 kills 54 processes
		steps = append(steps, all...)
	}
	var victims [][]byte
	for r, step := range steps {
		pa, pb := onShards(r, 3)
		victims = append(victims, pa, pb)
		tx, _ := loader.Begin(ctx)
		tx.Put(pa, []byte(strconv.Itoa(initial)))
		tx.Put(pb, []byte(strconv.Itoa(initial)))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		k.add(tx.(txn.Traced).Trace())
		child, err := remotedev.StartChild(clientRole, fmt.Sprintf("%d|%d|%s", step, r, strings.Join(b.addrs, ",")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := child.Expect("stopped"); err != nil {
			child.Process().Kill()
			t.Fatalf("step %d: %v", step, err)
		}
		if err := child.Process().Kill(); err != nil {
			t.Fatal(err)
		}
		<-child.Exited()
		killed := time.Now()
		for k.allLocks() > 0 {
			if time.Since(killed) > settleBound {
				t.Fatalf("step %d: locks held %v after the kill", step, settleBound)
			}
			time.Sleep(5 * time.Millisecond)
		}
		txr, _ := loader.Begin(ctx)
		va, err1 := txr.Get(pa)
		vb, err2 := txr.Get(pb)
		txr.Abort()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		committed := string(va) == "99" && string(vb) == "101"
		if !committed && !(string(va) == "100" && string(vb) == "100") {
			t.Fatalf("step %d: half applied: %s / %s", step, va, vb)
		}
		if committed != (step >= farm.StepBackedUp) {
			t.Fatalf("step %d: committed %v", step, committed)
		}
		t.Logf("step %d: killed; recovered in %v, committed %v", step, time.Since(killed).Round(time.Millisecond), committed)
	}
	stop()
	wg.Wait()
	worker.Close()
	if got, want := k.total(loader, victims...), initial*(k.accounts+len(victims)); got != want {
		t.Fatalf("money: %d, want %d", got, want)
	}
	k.waitSettled(lease)
	k.sameCopies()
	k.resolveInDoubt()
	if err := k.h.Check(); err != nil {
		t.Fatalf("%d transactions: %v", k.h.Len(), err)
	}
	t.Logf("%d worker commits", k.commits.Load())
}

// allLocks is the transactions holding locks at any node.
func (k *bank) allLocks() int {
	n := 0
	for _, nd := range k.b.nodes {
		n += nd.Stats().Locks
	}
	return n
}
