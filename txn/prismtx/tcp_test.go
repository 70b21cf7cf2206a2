package prismtx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// Child roles: a node process (argument: none; it says "ready CM" and
// serves until its stdin closes) and a client process that commits one
// transfer with a marker and stops at a hook point (argument
// "POINT|MARKER|FROM|TO|NODE,NODE,…"; it says "stopped" there and waits
// to be killed, or "done ERR" if it never got there).
const (
	nodeRole   = "prismtx-node"
	victimRole = "prismtx-victim"
)

func init() {
	remotedev.Role(nodeRole, func(string) int {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			NewService: prismtx.Service(prismtx.NodeConfig{Slots: 4096, Memory: 16 << 20, Stock: 256 << 10}, nil)})
		if err != nil {
			fmt.Fprintln(os.Stderr, nodeRole+":", err)
			return 1
		}
		fmt.Println("ready", srv.Info().CM)
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Close()
		return 0
	})
	remotedev.Role(victimRole, func(arg string) int {
		f := strings.Split(arg, "|")
		if len(f) != 5 {
			return 2
		}
		from, _ := strconv.Atoi(f[2])
		to, _ := strconv.Atoi(f[3])
		ctx := context.Background()
		db, err := prismtx.Dial(ctx, prismtx.Config{Device: "tcp://127.0.0.1:0", Nodes: strings.Split(f[4], ",")})
		if err != nil {
			fmt.Println("done", err)
			return 1
		}
		var reached atomic.Bool
		prismtx.SetHook(func(point string, _ *prismtx.DB) {
			if point == f[0] {
				reached.Store(true)
				fmt.Println("stopped")
				select {} // until killed
			}
		})
		for {
			tx, err := db.Begin(ctx)
			if err == nil {
				err = transferIn(tx, from, to, 7, f[1])
			}
			if err == nil {
				err = tx.Commit()
			}
			// A stop in the background installation comes after
			// Commit returned: wait for it there.
			for i := 0; err == nil && !reached.Load() && i < 1000; i++ {
				time.Sleep(time.Millisecond)
			}
			if reached.Load() {
				select {} // stopped in the background: until killed
			}
			if !errors.Is(err, txn.ErrAborted) {
				fmt.Println("done", err)
				return 1
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// killCount is how many client processes TestKilledClientsTCP kills:
// PRISMTX_KILLS, default 6.
func killCount(t *testing.T) int {
	s := os.Getenv("PRISMTX_KILLS")
	if s == "" {
		return 6
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("PRISMTX_KILLS=%q: want a positive count", s)
	}
	return n
}

// TestKilledClientsTCP: three node processes over tcp; two clients in
// this process transfer between twelve accounts while client processes,
// one after another, commit a transfer with a marker and are killed
// (SIGKILL) after prepare, after the commit decision, or half-way
// through installation (PRISMTX_KILLS of them, default 6; 50 for the
// issue's run). After the lease the marker of each is absent (aborted)
// or present (rolled forward) as its kill point says, the healthy
// clients kept committing, and the accounts' total is unchanged.
func TestKilledClientsTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	const lease = 100 * time.Millisecond
	const accounts, initial = 12, 1000
	var addrs []string
	for range 3 {
		c, err := remotedev.StartChild(nodeRole, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseInput(); _ = c.Wait(5 * time.Second) })
		f, err := c.Expect("ready")
		if err != nil || len(f) != 1 {
			t.Fatalf("node process: %v %v", f, err)
		}
		addrs = append(addrs, f[0])
	}
	ctx := tctx(t)
	var healthy []*prismtx.DB
	for range 2 {
		db, err := prismtx.Dial(ctx, prismtx.Config{Device: "tcp://127.0.0.1:0", Nodes: addrs, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		healthy = append(healthy, db)
	}
	err := txn.Run(ctx, healthy[0], func(tx txn.Tx) error {
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
	var stop atomic.Bool
	var commits atomic.Int64
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
				if err := transfer(ctx, db, from, to, 1); err != nil {
					t.Error(err)
					return
				}
				commits.Add(1)
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	points := []string{prismtx.HookPrepared, prismtx.HookDecided, prismtx.HookInstalling}
	for i := range killCount(t) {
		point := points[i%len(points)]
		from, to, marker := spread(accounts, i, fmt.Sprintf("killed/%d", i))
		arg := fmt.Sprintf("%s|%s|%d|%d|%s", point, marker, from, to, strings.Join(addrs, ","))
		v, err := remotedev.StartChild(victimRole, arg)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := v.Expect("stopped"); err != nil {
			t.Fatalf("client process %d (%s): %v %v", i, point, f, err)
		}
		before := commits.Load()
		if err := v.Kill(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease + lease/2)
		var found bool
		err = txn.Run(ctx, healthy[0], func(tx txn.Tx) error {
			_, err := tx.Get([]byte(marker))
			found = err == nil
			if errors.Is(err, txn.ErrNotFound) {
				err = nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := point != prismtx.HookPrepared; found != want {
			t.Fatalf("client killed at %s: marker present %v, want %v", point, found, want)
		}
		if commits.Load() == before {
			t.Fatalf("kill %d: the healthy clients committed nothing in the lease after it", i)
		}
	}
	stop.Store(true)
	wg.Wait()
	if sum := total(t, healthy[0], accounts); sum != accounts*initial {
		t.Fatalf("total %d, want %d: a transfer was half-applied", sum, accounts*initial)
	}
	t.Logf("%d clients killed; %d healthy commits; %d prepared timestamps resolved", killCount(t), commits.Load(),
		healthy[0].Stats().Resolved+healthy[1].Stats().Resolved)
}
