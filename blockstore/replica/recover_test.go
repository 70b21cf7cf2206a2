package replica_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// rbed is n replicas on a loop fabric of their own; a replica killed
// can be replaced by an empty one on the same cm address.
type rbed struct {
	t       *testing.T
	fabric  string
	names   []string
	addrs   []string
	servers []*memnode.Server
	reps    []*replica.Replica
	clients int
}

func newRBed(t *testing.T, n int) *rbed {
	b := &rbed{t: t, fabric: fmt.Sprintf("recover-test-%d", seq.Add(1)), names: make([]string, n),
		addrs: make([]string, n), servers: make([]*memnode.Server, n), reps: make([]*replica.Replica, n)}
	for i := range n {
		b.start(i, "127.0.0.1:0", nil)
	}
	return b
}

// start serves replica i, joining with jc when not nil.
func (b *rbed) start(i int, cmAddr string, jc *replica.JoinConfig) {
	b.t.Helper()
	b.names[i] = fmt.Sprintf("r%d-%d", i, seq.Add(1))
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + b.fabric + "/" + b.names[i], CM: cmAddr,
		NewService: replica.Service(replica.Config{MaxMemory: 64 << 20, Spare: 1024, Join: jc}, func(r *replica.Replica) { b.reps[i] = r }),
		Logger:     slog.New(slog.DiscardHandler)})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { srv.Close() })
	b.servers[i] = srv
	if b.addrs[i] == "" {
		b.addrs[i] = srv.Info().CM // a replica that rejoins keeps it
	}
}

// kill crashes replica i (its memory is gone) and frees its address.
func (b *rbed) kill(i int) {
	b.t.Helper()
	if err := loop.Get(b.fabric).Kill(b.names[i]); err != nil {
		b.t.Fatal(err)
	}
	b.servers[i].Close()
}

// rejoin starts an empty replica i on its old address, recovering
// (without copying when skip).
func (b *rbed) rejoin(i int, skip bool) *replica.Replica {
	jc := &replica.JoinConfig{Replicas: b.addrs, Self: b.addrs[i], Retry: 10 * time.Millisecond}
	if skip {
		replica.SkipCopy(jc)
	}
	b.start(i, b.addrs[i], jc)
	return b.reps[i]
}

func (b *rbed) device() string {
	b.clients++
	return fmt.Sprintf("loop://%s/c%d", b.fabric, b.clients)
}

// open makes k clients of design on a new volume; thrifty, for
// PRISM-RS, sends phases to the first majority of the replicas only.
func (b *rbed) open(design string, k int, bs int, blocks uint64, thrifty bool) []store {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cs []store
	for len(cs) < k {
		var c store
		var err error
		switch design {
		case "prism-rs":
			cfg := prismrs.Config{Device: b.device(), Replicas: b.addrs, Thrifty: thrifty, ThriftyWait: time.Second}
			if len(cs) == 0 && blocks > 0 {
				c, err = prismrs.Create(ctx, cfg, bs, blocks)
			} else {
				c, err = prismrs.Dial(ctx, cfg)
			}
		default:
			cfg := abdrpc.Config{Device: b.device(), Replicas: b.addrs, Logger: slog.New(slog.DiscardHandler)}
			if len(cs) == 0 && blocks > 0 {
				err = abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: bs, Blocks: blocks, Replicas: b.addrs})
			}
			if err == nil {
				c, err = abdrpc.Dial(ctx, cfg)
			}
		}
		if err != nil {
			b.t.Fatal(err)
		}
		b.t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// TestRecovery: on n = 3 replicas, 16 clients read and write 8 blocks;
// witness writes of 8 other blocks reach replicas 0 and 1 only (a
// PRISM-RS client sending to the first majority; for ABD, written into
// their stores). Replica 0 is killed and replaced by an empty one that
// joins while the clients go on writing; once it is a member and every
// client uses it, replica 1 is killed. Every acknowledged write is read
// back, and porcupine finds the history linearizable: the copy must
// have read replica 1, the only other holder of the witnesses. Without
// the copy (the negative control), the same schedule loses the
// witnesses, and both checks say so.
func TestRecovery(t *testing.T) {
	for _, design := range []string{"prism-rs", "abd-rpc"} {
		t.Run(design, func(t *testing.T) {
			lost, res := recoveryRun(t, design, true)
			if len(lost) > 0 || res != porcupine.Ok {
				t.Fatalf("with the copy: %d acknowledged writes lost %v, history %v", len(lost), lost, res)
			}
		})
		t.Run(design+"/negative-control", func(t *testing.T) {
			lost, res := recoveryRun(t, design, false)
			if len(lost) == 0 || res == porcupine.Ok {
				t.Fatalf("a replica that rejoined without copying: %d writes lost, history %v: the checks missed the loss", len(lost), res)
			}
			t.Logf("without the copy, as expected: history %v, %d acknowledged writes lost, e.g. %s", res, len(lost), lost[0])
		})
	}
}

// recoveryRun runs TestRecovery's schedule and returns the acknowledged
// writes lost and porcupine's verdict.
func recoveryRun(t *testing.T, design string, copyOn bool) ([]string, porcupine.CheckResult) {
	const (
		clients = 16
		blocks  = 8 // the workload's; blocks to 2·blocks-1 are the witnesses
		bs      = 512
		volume  = 4096 // the recovery copies them all
	)
	b := newRBed(t, 3)
	cs := b.open(design, clients, bs, volume, false)
	rec := newRecorder()
	// The witnesses: acknowledged by replicas 0 and 1 only.
	switch design {
	case "prism-rs":
		w := b.open(design, 1, bs, 0, true)[0]
		for id := uint64(blocks); id < 2*blocks; id++ {
			if err := rec.write(w, 100, id); err != nil {
				t.Fatal(err)
			}
		}
	default:
		for id := uint64(blocks); id < 2*blocks; id++ {
			v := rec.next.Add(1)
			call := rec.h.Now()
			for _, r := range b.reps[:2] {
				if err := replica.WriteStore(r, id, replica.MakeTag(1, 0xfffffff0), blockOf(bs, v)); err != nil {
					t.Fatal(err)
				}
			}
			rec.addWrite(100, id, v, call, rec.h.Now(), true)
		}
	}
	stop := make(chan struct{})
	errs := make(chan error, clients)
	wg := rec.run(cs, blocks, stop, errs)
	step := func(ops uint64) {
		t.Helper()
		if err := rec.waitOps(rec.done.Load()+ops, 20*time.Second); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	step(1000)
	b.kill(0)
	step(300)
	before := rec.done.Load()
	r0 := b.rejoin(0, !copyOn)
	select {
	case <-r0.Joined():
	case <-time.After(20 * time.Second):
		t.Fatal("replica 0 did not recover in 20 s")
	}
	during := rec.done.Load() - before
	if err := waitConnected(cs, 3, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	step(500)
	b.kill(1)
	step(1000)
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
	c := b.open(design, 1, bs, 0, false)[0]
	for id := range uint64(2 * blocks) {
		v, err := rec.read(c, 200, id)
		if err != nil {
			t.Fatal(err)
		}
		final[id] = v
	}
	res, _ := rec.h.Check(30 * time.Second)
	t.Logf("%d operations, %d while replica 0 recovered (copy %v)", rec.h.Len(), during, copyOn)
	if copyOn && during == 0 {
		t.Errorf("no operation ran while replica 0 recovered: the schedule is not the one wanted")
	}
	return rec.lost(final), res
}

// TestRecoveryNeedsBothOthers: with n = 3 a replica that rejoins must
// copy from both others (f+1 of the 2f): while one of them is frozen it
// stays out (not a member), and once that one answers again it
// completes; then, with the other killed, the blocks written before read
// back through it.
func TestRecoveryNeedsBothOthers(t *testing.T) {
	const bs, blocks = 512, 64
	b := newRBed(t, 3)
	c := b.open("prism-rs", 1, bs, blocks, false)[0]
	rec := newRecorder()
	for id := range uint64(blocks) {
		if err := rec.write(c, 0, id); err != nil {
			t.Fatal(err)
		}
	}
	b.kill(0)
	fab := loop.Get(b.fabric)
	if err := fab.Pause(b.names[1]); err != nil {
		t.Fatal(err)
	}
	r0 := b.rejoin(0, false)
	time.Sleep(300 * time.Millisecond)
	if !r0.Recovering() {
		t.Fatal("a replica became a member with one of the two others frozen")
	}
	if err := fab.Resume(b.names[1]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r0.Joined():
	case <-time.After(20 * time.Second):
		t.Fatal("replica 0 did not recover in 20 s once both others answered")
	}
	b.kill(1)
	c2 := b.open("prism-rs", 1, bs, 0, false)[0]
	final := map[uint64]uint64{}
	for id := range uint64(blocks) {
		v, err := rec.read(c2, 1, id)
		if err != nil {
			t.Fatal(err)
		}
		final[id] = v
	}
	if lost := rec.lost(final); len(lost) > 0 {
		t.Fatalf("%d writes lost: %v", len(lost), lost)
	}
}
