package prismrs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/check"
)

// value is the block that writes value v: v in its first 8 bytes, then
// bytes derived from v, so that a read can tell a whole block from a
// torn one.
func value(bs int, v uint64) []byte {
	d := make([]byte, bs)
	binary.LittleEndian.PutUint64(d, v)
	for i := 8; i < bs; i++ {
		d[i] = byte(v*31 + uint64(i))
	}
	return d
}

// valueOf decodes a block written by value (zeros: 0).
func valueOf(d []byte) (uint64, error) {
	v := binary.LittleEndian.Uint64(d)
	if v == 0 {
		for _, x := range d {
			if x != 0 {
				return 0, fmt.Errorf("a block neither zero nor written")
			}
		}
		return 0, nil
	}
	for i := 8; i < len(d); i++ {
		if d[i] != byte(v*31+uint64(i)) {
			return 0, fmt.Errorf("block of value %d torn at byte %d", v, i)
		}
	}
	return v, nil
}

// TestLinearizable: 16 clients, each used by two goroutines at once,
// read and write 8 blocks, 20,000 operations, while up to f replicas of
// n = 2f+1 at a time are paused for up to 20 ms, or half the clients are
// each cut from up to f replicas (a partition); then one is killed for
// the rest of the run. Every operation completes, no read returns a
// torn block, and porcupine finds the history linearizable (a register
// per block). For n = 3 and n = 5, and for n = 3 with thrifty phases
// (under the race detector those two run a quarter of the operations).
func TestLinearizable(t *testing.T) {
	for _, c := range []struct {
		n       int
		thrifty bool
	}{{3, false}, {5, false}, {3, true}} {
		ops := uint64(20000)
		if raceEnabled && (c.n != 3 || c.thrifty) {
			ops /= 4 // the first case runs in full
		}
		t.Run(fmt.Sprintf("n=%d/thrifty=%v", c.n, c.thrifty), func(t *testing.T) { testLinearizable(t, c.n, c.thrifty, ops) })
	}
}

func testLinearizable(t *testing.T, n int, thrifty bool, ops uint64) {
	const (
		clients = 16
		blocks  = 8
		bs      = 512
	)
	b := newBed(t, n)
	b.thrifty = thrifty
	cs := []*prismrs.Client{b.create(bs, blocks)}
	for len(cs) < clients {
		cs = append(cs, b.dial())
	}
	h := check.NewRegisterHistory()
	var next, done atomic.Uint64
	stop := make(chan struct{})
	faults := make(chan error, 1)
	var pauses int
	var killedAt uint64
	go func() {
		var err error
		pauses, killedAt, err = injectFaults(b, &done, ops, stop)
		faults <- err
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2*clients)
	for i := range 2 * clients {
		c := cs[i%clients]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for done.Add(1) <= ops {
				if err := randomOp(c, h, i, rng, blocks, bs, &next); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-faults; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	var wb, phases, lists uint64
	for _, c := range cs {
		wb, phases, lists = wb+c.WriteBacks(), phases+c.Phases(), lists+c.RoundTrips()
	}
	t.Logf("%d operations, %d pauses and partitions, a replica killed after %d operations, %d reads wrote back, %.2f lists per phase",
		h.Len(), pauses, killedAt, wb, float64(lists)/float64(phases))
	if uint64(h.Len()) < ops || pauses < 5 || killedAt == 0 || killedAt >= ops {
		t.Fatalf("%d operations recorded, %d pauses, killed after %d: not the schedule wanted", h.Len(), pauses, killedAt)
	}
	res, info := h.Check(30 * time.Second)
	if res != porcupine.Ok {
		visualize(t, info)
		t.Fatalf("history: %v", res)
	}
}

// opTimeout bounds each operation of the linearizability test: an
// operation that takes longer is stuck.
const opTimeout = 10 * time.Second

// injectFaults pauses 1 to f replicas of n = 2f+1 at a time for 1 to
// 20 ms, every other time partitions instead half the clients each from
// 1 to f replicas, until done reaches two thirds of ops, then kills one
// replica for the rest of the run. It returns the pauses and partitions
// (both counted in pauses) and the operations done when it killed.
func injectFaults(b *bed, done *atomic.Uint64, ops uint64, stop <-chan struct{}) (pauses int, killedAt uint64, err error) {
	f := b.fab()
	rng := rand.New(rand.NewPCG(1, 2))
	for done.Load() < 2*ops/3 {
		select {
		case <-stop:
			return pauses, 0, nil
		default:
		}
		if pauses%2 == 1 {
			// A partition: half the clients, drawn at random, each lose
			// 1 to f replicas of their own choosing (so that different
			// clients' majorities differ), while the replicas stay up.
			var cut [][2]string
			for c := range int(b.clients.Load()) {
				if rng.IntN(2) == 0 {
					continue
				}
				for _, r := range rng.Perm(len(b.names))[:1+rng.IntN(len(b.names)/2)] {
					pair := [2]string{fmt.Sprintf("c%d", c+1), b.names[r]}
					if err := f.Partition(pair[0], pair[1]); err != nil {
						return pauses, 0, err
					}
					cut = append(cut, pair)
				}
			}
			time.Sleep(time.Millisecond + time.Duration(rng.IntN(20))*time.Millisecond)
			for _, pair := range cut {
				if err := f.Heal(pair[0], pair[1]); err != nil {
					return pauses, 0, err
				}
			}
			pauses++
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			continue
		}
		k := 1 + rng.IntN(len(b.names)/2)
		rs := rng.Perm(len(b.names))[:k]
		for _, r := range rs {
			if err := f.Pause(b.names[r]); err != nil {
				return pauses, 0, err
			}
		}
		time.Sleep(time.Millisecond + time.Duration(rng.IntN(20))*time.Millisecond)
		for _, r := range rs {
			if err := f.Resume(b.names[r]); err != nil {
				return pauses, 0, err
			}
		}
		pauses++
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
	killedAt = done.Load()
	return pauses, killedAt, f.Kill(b.names[rng.IntN(len(b.names))])
}

// visualize writes porcupine's rendering of a failed check to a file
// that outlives the test.
func visualize(t *testing.T, info porcupine.LinearizationInfo) {
	f, err := os.CreateTemp("", "prismrs-history-*.html")
	if err != nil {
		return
	}
	defer f.Close()
	if porcupine.Visualize(check.RegisterModel, info, f) == nil {
		t.Logf("history: %s", f.Name())
	}
}

// TestNegativeControl: a writer that stops after reaching one replica
// (its write's outcome unknown), then a read whose majority includes
// that replica, then a read whose majority does not. With the reads'
// write-back the second read sees the value the first returned; without
// it, it sees the old one, and the checker must call the history not
// linearizable.
func TestNegativeControl(t *testing.T) {
	for _, writeBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("write-back=%v", writeBack), func(t *testing.T) {
			const bs = 512
			b := newBed(t, 3)
			w := b.create(bs, 1)
			r1, r2 := b.dial(), b.dial()
			if !writeBack {
				prismrs.SkipWriteBack(r1)
				prismrs.SkipWriteBack(r2)
			}
			ctx := tctx(t)
			f := b.fab()
			h := check.NewRegisterHistory()
			call := h.Now()
			if err := prismrs.WriteOne(ctx, w, 0, value(bs, 1), 0); err != nil {
				t.Fatal(err)
			}
			h.Add(0, check.RegisterInput{Write: true, Value: 1}, check.RegisterOutput{}, call, 0, true)
			read := func(client int, c *prismrs.Client, paused string) uint64 {
				f.Pause(paused)
				defer f.Resume(paused)
				call := h.Now()
				d, err := c.Read(ctx, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				v, err := valueOf(d)
				if err != nil {
					t.Fatal(err)
				}
				h.Add(client, check.RegisterInput{}, check.RegisterOutput{Value: v}, call, h.Now(), false)
				return v
			}
			if v := read(1, r1, b.names[2]); v != 1 { // majority {0, 1}
				t.Fatalf("first read: %d, want 1", v)
			}
			v2 := read(2, r2, b.names[0]) // majority {1, 2}
			res, _ := h.Check(5 * time.Second)
			switch {
			case writeBack && (v2 != 1 || res != porcupine.Ok):
				t.Fatalf("with write-back: second read %d, history %v", v2, res)
			case !writeBack && (v2 != 0 || res != porcupine.Illegal):
				t.Fatalf("without write-back: second read %d, history %v; want 0 and Illegal", v2, res)
			}
		})
	}
}

// a compile-time check that the client is a Store.
var _ blockstore.Store = (*prismrs.Client)(nil)

// TestKilledWriters: writers whose nodes are killed mid-run (their
// writes in flight may have reached some replicas, or none) leave no
// torn block and no history the checker rejects; the other clients go
// on.
func TestKilledWriters(t *testing.T) {
	const (
		clients = 8
		victims = 3
		blocks  = 4
		bs      = 1024
		ops     = 4000
	)
	b := newBed(t, 3)
	cs := []*prismrs.Client{b.create(bs, blocks)}
	for len(cs) < clients {
		cs = append(cs, b.dial())
	}
	h := check.NewRegisterHistory()
	var next, done, killed atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range cs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			for done.Add(1) <= ops {
				id := rng.Uint64N(blocks)
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				call := h.Now()
				if i < victims || rng.IntN(2) == 0 {
					v := next.Add(1)
					err := c.Write(ctx, id, value(bs, v))
					cancel()
					h.Add(i, check.RegisterInput{Write: true, Register: id, Value: v}, check.RegisterOutput{}, call, h.Now(), err != nil)
					if err != nil {
						if i < victims {
							killed.Add(1)
							return
						}
						errs <- fmt.Errorf("client %d: write: %w", i, err)
						return
					}
					continue
				}
				d, err := c.Read(ctx, id, nil)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("client %d: read: %w", i, err)
					return
				}
				v, err := valueOf(d)
				if err != nil {
					errs <- fmt.Errorf("client %d: block %d: %w", i, id, err)
					return
				}
				h.Add(i, check.RegisterInput{Register: id}, check.RegisterOutput{Value: v}, call, h.Now(), false)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	// The victims are the first clients: their devices are c1, c2, c3.
	for v := range victims {
		for done.Load() < uint64(ops*(v+1)/(victims+2)) {
			select {
			case <-finished: // every client stopped early: their errors say why
				t.Fatalf("the clients stopped after %d operations, before victim %d was killed: %v", done.Load(), v, drain(errs))
			case <-time.After(time.Millisecond):
			}
		}
		if err := b.fab().Kill(fmt.Sprintf("c%d", v+1)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if killed.Load() != victims {
		t.Fatalf("%d of %d victims saw their writes fail", killed.Load(), victims)
	}
	if res, info := h.Check(30 * time.Second); res != porcupine.Ok {
		visualize(t, info)
		t.Fatalf("history: %v", res)
	}
}

// TestLinearizableTCP: the linearizability test's load, shorter and
// without faults, over tcp devices.
func TestLinearizableTCP(t *testing.T) {
	const (
		clients = 16
		blocks  = 8
		bs      = 4096
		ops     = 3000
	)
	b := newBedOn(t, "tcp", 3)
	cs := []*prismrs.Client{b.create(bs, blocks)}
	for len(cs) < clients {
		cs = append(cs, b.dial())
	}
	h := check.NewRegisterHistory()
	var next, done atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range cs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			for done.Add(1) <= ops {
				if err := randomOp(c, h, i, rng, blocks, bs, &next); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if res, info := h.Check(30 * time.Second); res != porcupine.Ok {
		visualize(t, info)
		t.Fatalf("history: %v", res)
	}
}

// drain returns the errors queued in errs so far.
func drain(errs chan error) []error {
	var out []error
	for {
		select {
		case err := <-errs:
			out = append(out, err)
		default:
			return out
		}
	}
}

// randomOp runs one operation of client i (number i in the history): a
// Write of a fresh value or a Read, of a random block of blocks, each
// half the time, recorded in h. A write that fails is recorded as
// possibly applied.
func randomOp(c blockstore.Store, h *check.RegisterHistory, i int, rng *rand.Rand, blocks uint64, bs int, next *atomic.Uint64) error {
	id := rng.Uint64N(blocks)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	call := h.Now()
	if rng.IntN(2) == 0 {
		v := next.Add(1)
		err := c.Write(ctx, id, value(bs, v))
		h.Add(i, check.RegisterInput{Write: true, Register: id, Value: v}, check.RegisterOutput{}, call, h.Now(), err != nil)
		if err != nil {
			return fmt.Errorf("client %d: write: %w", i, err)
		}
		return nil
	}
	d, err := c.Read(ctx, id, nil)
	if err != nil {
		return fmt.Errorf("client %d: read: %w", i, err)
	}
	v, err := valueOf(d)
	if err != nil {
		return fmt.Errorf("client %d: block %d: %w", i, id, err)
	}
	h.Add(i, check.RegisterInput{Register: id}, check.RegisterOutput{Value: v}, call, h.Now(), false)
	return nil
}
