package replica_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
)

// replicaRole is a replica process: its argument is "CM|JOIN", the cm
// address to listen on and, when not empty, the comma-separated replica
// list to rejoin (what 'rdmakit rs replica --listen CM --join JOIN'
// does). It says "ready CM" once it listens and "joined" once it is a
// member, and serves until its stdin closes (or it is killed).
const replicaRole = "rs-replica"

func init() {
	remotedev.Role(replicaRole, func(arg string) int {
		cmAddr, join, _ := strings.Cut(arg, "|")
		cfg := replica.Config{MaxMemory: 64 << 20, Spare: 1024}
		if join != "" {
			cfg.Join = &replica.JoinConfig{Replicas: strings.Split(join, ","), Self: cmAddr, Retry: 10 * time.Millisecond}
		}
		var rep *replica.Replica
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: cmAddr,
			NewService: replica.Service(cfg, func(r *replica.Replica) { rep = r })})
		if err != nil {
			fmt.Fprintln(os.Stderr, replicaRole+":", err)
			return 1
		}
		fmt.Println("ready", srv.Info().CM)
		<-rep.Joined()
		fmt.Println("joined")
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Close()
		return 0
	})
}

// startReplica starts a replica process on cmAddr (joining join, when
// not empty) and returns it with its cm address once it is a member.
func startReplica(t *testing.T, cmAddr, join string) (*remotedev.Child, string) {
	t.Helper()
	c, err := remotedev.StartChild(replicaRole, cmAddr+"|"+join)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kill(5 * time.Second) })
	f, err := c.Expect("ready")
	if err != nil || len(f) != 1 {
		t.Fatalf("replica process: %v %v", f, err)
	}
	if _, err := c.Expect("joined"); err != nil {
		t.Fatalf("replica process %s: %v", f[0], err)
	}
	return c, f[0]
}

// killCycles is how many kill -9 and restart cycles TestKillRestartTCP
// runs: RS_KILL_CYCLES, default 3.
func killCycles(t *testing.T) int {
	s := os.Getenv("RS_KILL_CYCLES")
	if s == "" {
		return 3
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("RS_KILL_CYCLES=%q: want a positive count", s)
	}
	return n
}

// TestKillRestartTCP: three replicas in processes of their own, over
// tcp; 16 clients read and write 8 blocks while, cycle after cycle, one
// replica is killed with SIGKILL mid-run and restarted empty with a join
// (replica.Config.Join, as 'rs replica --join'); the next kill waits
// until it is a member and every client uses it again, so never more
// than f = 1 is down. At least 1,000 operations per cycle (20 cycles:
// RS_KILL_CYCLES=20, 20,000 operations); then every block is read back:
// no acknowledged write is lost, and porcupine finds the history
// linearizable. For PRISM-RS and for ABD over RPC.
func TestKillRestartTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replica processes")
	}
	for _, design := range []string{"prism-rs", "abd-rpc"} {
		t.Run(design, func(t *testing.T) { killRestart(t, design) })
	}
}

// dialTCP connects a client of design to the replicas at addrs over
// tcp, creating the volume first when blocks > 0.
func dialTCP(ctx context.Context, design string, addrs []string, bs int, blocks uint64) (store, error) {
	if design == "prism-rs" {
		cfg := prismrs.Config{Device: "tcp://127.0.0.1:0", Replicas: addrs, Timeout: 50 * time.Millisecond}
		if blocks > 0 {
			return prismrs.Create(ctx, cfg, bs, blocks)
		}
		return prismrs.Dial(ctx, cfg)
	}
	cfg := abdrpc.Config{Device: "tcp://127.0.0.1:0", Replicas: addrs, Redial: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if blocks > 0 {
		if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: bs, Blocks: blocks, Replicas: addrs}); err != nil {
			return nil, err
		}
	}
	return abdrpc.Dial(ctx, cfg)
}

func killRestart(t *testing.T, design string) {
	const (
		clients = 16
		blocks  = 8 // the workload's
		bs      = 512
		volume  = 1024 // a restarted replica copies them all while the clients go on
	)
	cycles := killCycles(t)
	minOps := uint64(1000 * cycles)
	procs := make([]*remotedev.Child, 3)
	addrs := make([]string, 3)
	for i := range procs {
		procs[i], addrs[i] = startReplica(t, "127.0.0.1:0", "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var cs []store
	for len(cs) < clients {
		var create uint64
		if len(cs) == 0 {
			create = volume
		}
		c, err := dialTCP(ctx, design, addrs, bs, create)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	rec := newRecorder()
	stop := make(chan struct{})
	errs := make(chan error, clients)
	wg := rec.run(cs, blocks, stop, errs)
	fail := func(err error) {
		t.Helper()
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	start := time.Now()
	perCycle := minOps / uint64(cycles)
	var during uint64 // operations while a replica restarted and recovered
	for k := range cycles {
		if err := rec.waitOps(rec.done.Load()+perCycle/2, 30*time.Second); err != nil {
			fail(err)
		}
		i := k % len(procs)
		if err := procs[i].Kill(5 * time.Second); err != nil {
			fail(err)
		}
		if err := waitGone(cs, len(procs), 30*time.Second); err != nil {
			fail(fmt.Errorf("cycle %d: %w", k, err))
		}
		if err := rec.waitOps(rec.done.Load()+perCycle/4, 30*time.Second); err != nil {
			fail(err) // the others go on without it
		}
		before := rec.done.Load()
		procs[i], _ = startReplica(t, addrs[i], strings.Join(addrs, ","))
		during += rec.done.Load() - before
		if err := waitConnected(cs, len(procs), 30*time.Second); err != nil {
			fail(fmt.Errorf("cycle %d: %w", k, err))
		}
	}
	if err := rec.waitOps(minOps, 60*time.Second); err != nil {
		fail(err)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	final := map[uint64]uint64{}
	for id := range uint64(blocks) {
		v, err := rec.read(cs[0], 200, id)
		if err != nil {
			t.Fatal(err)
		}
		final[id] = v
	}
	ops, took := rec.h.Len(), time.Since(start)
	if lost := rec.lost(final); len(lost) > 0 {
		t.Fatalf("%d acknowledged writes lost: %v", len(lost), lost)
	}
	res, _ := rec.h.Check(60 * time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations: %v", ops, res)
	}
	t.Logf("%d kill -9 and rejoin cycles, %d operations in %v (%d while a replica restarted and copied), linearizable, no acknowledged write lost",
		cycles, ops, took.Round(time.Millisecond), during)
	if uint64(ops) < minOps {
		t.Fatalf("%d operations, want at least %d", ops, minOps)
	}
}

// waitGone waits until no client has a connection to all n replicas
// (they saw the one killed go), at most d.
func waitGone(cs []store, n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, c := range cs {
		for c.Connected() >= n {
			if time.Now().After(deadline) {
				return fmt.Errorf("a client still reaches %d of %d replicas %v after a kill", c.Connected(), n, d)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}
