package prismrs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
)

// TestConflictingWriters: clients writing the same blocks at once leave
// every block with one of the values written, which every client then
// reads; replaced buffers go back to the replicas and are recycled.
func TestConflictingWriters(t *testing.T) {
	b := newBed(t, 3)
	const bs, blocks, clients, rounds = 512, 2, 8, 150
	cs := []interface {
		Write(context.Context, uint64, []byte) error
	}{b.create(bs, blocks)}
	for len(cs) < clients {
		cs = append(cs, b.dial())
	}
	ctx := tctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range cs {
		wg.Go(func() {
			for r := range rounds {
				if err := c.Write(ctx, uint64(r%blocks), block(bs, byte(i))); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r1, r2 := b.dial(), b.dial()
	for id := range uint64(blocks) {
		v1, err1 := r1.Read(ctx, id, nil)
		v2, err2 := r2.Read(ctx, id, nil)
		if err1 != nil || err2 != nil || !bytes.Equal(v1, v2) {
			t.Fatalf("block %d: %v %v, or two clients read different values", id, err1, err2)
		}
		found := false
		for i := range clients {
			found = found || bytes.Equal(v1, block(bs, byte(i)))
		}
		if !found {
			t.Fatalf("block %d holds a value nobody wrote", id)
		}
	}
	// Every write replaced a buffer at each replica it reached (or lost
	// its CAS and gave its own back): about clients·rounds returns per
	// replica, all recycled after quiescence.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok := true
		for _, r := range b.replicas {
			st := r.Stats()
			ok = ok && st.Returned >= clients*rounds/2 && st.Recycled == st.Returned
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			for i, r := range b.replicas {
				t.Errorf("replica %d: %+v", i, r.Stats())
			}
			t.Fatal("replaced buffers not returned and recycled")
		}
	}
}

// TestPausedReplica: with one replica of three paused, reads and writes
// complete; once it is back and another is paused, reads still return
// the latest values (the lagging replica is brought up to date by the
// reads' write-back). The client has 2 slots per replica: the first two
// writes hold the paused replica's, so the others never reach it.
func TestPausedReplica(t *testing.T) {
	b := newBed(t, 3)
	cfg := b.config()
	cfg.Slots = 2
	c := b.createWith(cfg, 1024, 8)
	ctx := tctx(t)
	f := b.fab()
	f.Pause(b.names[2])
	for i := range 8 {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Write(octx, uint64(i), block(1024, byte(i)))
		cancel()
		if err != nil {
			t.Fatalf("write %d with a replica paused: %v", i, err)
		}
	}
	f.Resume(b.names[2])
	f.Pause(b.names[0])
	for i := range 8 {
		got, err := c.Read(ctx, uint64(i), nil)
		if err != nil || !bytes.Equal(got, block(1024, byte(i))) {
			t.Fatalf("read %d with another replica paused: %v", i, err)
		}
	}
	if c.WriteBacks() == 0 {
		t.Error("the lagging replica was read but no read wrote back")
	}
	f.Resume(b.names[0])
}

// TestNoQuorum: with a majority paused, operations fail with
// ErrNoQuorum when their context ends; once the replicas answer again,
// operations succeed.
func TestNoQuorum(t *testing.T) {
	b := newBed(t, 3)
	c := b.create(512, 4)
	ctx := tctx(t)
	f := b.fab()
	f.Pause(b.names[0])
	f.Pause(b.names[1])
	octx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := c.Write(octx, 1, block(512, 1))
	cancel()
	if !errors.Is(err, blockstore.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write with a majority paused: %v", err)
	}
	octx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Read(octx, 1, nil)
	cancel()
	if !errors.Is(err, blockstore.ErrNoQuorum) {
		t.Fatalf("read with a majority paused: %v", err)
	}
	f.Resume(b.names[0])
	f.Resume(b.names[1])
	if err := c.Write(ctx, 1, block(512, 2)); err != nil {
		t.Fatalf("write after the pause: %v", err)
	}
	if got, err := c.Read(ctx, 1, nil); err != nil || !bytes.Equal(got, block(512, 2)) {
		t.Fatalf("read after the pause: %v", err)
	}
}

// TestKilledReplicas: with f = 2 of 5 replicas killed, operations
// complete and reads return the latest values; with a third killed they
// fail at once with ErrNoQuorum.
func TestKilledReplicas(t *testing.T) {
	b := newBed(t, 5)
	c := b.create(512, 4)
	ctx := tctx(t)
	if err := c.Write(ctx, 0, block(512, 1)); err != nil {
		t.Fatal(err)
	}
	f := b.fab()
	f.Kill(b.names[0])
	f.Kill(b.names[3])
	for i := range 20 {
		if err := c.Write(ctx, uint64(i%4), block(512, byte(i))); err != nil {
			t.Fatalf("write %d with 2 of 5 killed: %v", i, err)
		}
		if got, err := c.Read(ctx, uint64(i%4), nil); err != nil || !bytes.Equal(got, block(512, byte(i))) {
			t.Fatalf("read %d with 2 of 5 killed: %v", i, err)
		}
	}
	d := b.dial() // a new client needs only a majority
	if got, err := d.Read(ctx, 3, nil); err != nil || !bytes.Equal(got, block(512, 19)) {
		t.Fatalf("a new client with 2 of 5 killed: %v", err)
	}
	f.Kill(b.names[1])
	t0 := time.Now()
	for i := range 3 {
		// The client learns of the death from its first list to it.
		err := c.Write(ctx, 0, block(512, 0))
		if i > 0 && !errors.Is(err, blockstore.ErrNoQuorum) {
			t.Fatalf("write with 3 of 5 killed: %v", err)
		}
	}
	if _, err := c.Read(ctx, 0, nil); !errors.Is(err, blockstore.ErrNoQuorum) {
		t.Fatalf("read with 3 of 5 killed: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("failing took %v", d)
	}
}

// TestReconnect: a replica paused for longer than the connections'
// retry budget costs the client its connection to it; operations go on
// with the others, and once the replica answers again the client
// connects to it again and uses it: with another replica paused then,
// operations still complete.
func TestReconnect(t *testing.T) {
	b := newBed(t, 3)
	cfg := b.config()
	cfg.Timeout = 10 * time.Millisecond // a retry budget of 80 ms
	c := b.createWith(cfg, 512, 4)
	ctx := tctx(t)
	f := b.fab()
	f.Pause(b.names[0])
	for i := 0; c.Connected() == 3; i++ {
		if err := c.Write(ctx, uint64(i%4), block(512, byte(i))); err != nil {
			t.Fatalf("write %d with a replica paused: %v", i, err)
		}
		if i > 10000 {
			t.Fatal("the paused replica's connection did not fail")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Write(ctx, 1, block(512, 100)); err != nil {
		t.Fatalf("write with one connection gone: %v", err)
	}
	f.Resume(b.names[0])
	for deadline := time.Now().Add(10 * time.Second); c.Connected() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client did not reconnect to the replica")
		}
	}
	f.Pause(b.names[1])
	defer f.Resume(b.names[1])
	if err := c.Write(ctx, 1, block(512, 101)); err != nil {
		t.Fatalf("write through the reconnected replica: %v", err)
	}
	if got, err := c.Read(ctx, 1, nil); err != nil || !bytes.Equal(got, block(512, 101)) {
		t.Fatalf("read through the reconnected replica: %v", err)
	}
}

// TestThrifty: thrifty phases go to the first majority only, and to the
// others when one of it is paused, then killed.
func TestThrifty(t *testing.T) {
	b := newBed(t, 3)
	b.thrifty = true
	c := b.create(512, 4)
	ctx := tctx(t)
	for i := range 10 {
		if err := c.Write(ctx, uint64(i%4), block(512, byte(i))); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(ctx, uint64(i%4), nil); err != nil {
			t.Fatal(err)
		}
	}
	if p, l := c.Phases(), c.RoundTrips(); l != 2*p {
		t.Errorf("%d phases posted %d lists, want 2 each", p, l)
	}
	if c.WriteBacks() != 0 {
		t.Errorf("%d write-backs with every phase on the same majority", c.WriteBacks())
	}
	f := b.fab()
	f.Pause(b.names[0])
	if err := c.Write(ctx, 1, block(512, 50)); err != nil {
		t.Fatalf("write with the first replica paused: %v", err)
	}
	f.Resume(b.names[0])
	f.Kill(b.names[1])
	for i := range 5 {
		if got, err := c.Read(ctx, 1, nil); err != nil || !bytes.Equal(got, block(512, 50)) {
			t.Fatalf("read %d with the second replica killed: %v", i, err)
		}
	}
}
