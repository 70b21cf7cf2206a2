package abdrpc_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
)

// writeRead writes v to every block and reads it back.
func writeRead(t *testing.T, c *abdrpc.Client, v byte) {
	t.Helper()
	ctx := ctx5(t)
	data := bytes.Repeat([]byte{v}, c.Layout().BlockSize)
	for id := range c.Layout().Blocks {
		if err := c.Write(ctx, id, data); err != nil {
			t.Fatalf("write %d of block %d: %v", v, id, err)
		}
		if got, err := c.Read(ctx, id, nil); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read block %d after writing %d: %v", id, v, err)
		}
	}
}

// TestOneReplicaDown: with one replica of three paused, closed or
// crashed, reads and writes go on with the other two.
func TestOneReplicaDown(t *testing.T) {
	for _, how := range []string{"paused", "closed", "killed"} {
		t.Run(how, func(t *testing.T) {
			cl := startCluster(t, 3, "", nil)
			cl.create(512, 4)
			c := cl.dial()
			writeRead(t, c, 1)
			switch how {
			case "paused":
				cl.fab().Pause("r1")
				defer cl.fab().Resume("r1")
			case "closed":
				cl.srvs[1].Close()
			case "killed":
				cl.fab().Kill("r1")
			}
			for v := range byte(5) {
				writeRead(t, c, 2+v)
			}
			// A client dialed now finds the volume on the two others.
			writeRead(t, cl.dial(), 9)
		})
	}
}

// TestReplicaBack: a replica paused long enough to lose its connections
// is re-dialed once it answers again, and then counts towards the
// majorities: with another replica paused, its answers make the quorum.
func TestReplicaBack(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.create(512, 2)
	c := cl.dial()
	writeRead(t, c, 1)
	cl.fab().Pause("r0")
	deadline := time.Now().Add(5 * time.Second)
	for v := byte(2); c.Connected() == 3; v++ { // the connection fails after replica.ClientTimeout × 8
		if time.Now().After(deadline) {
			t.Fatal("the paused replica's connection never failed")
		}
		writeRead(t, c, v)
		time.Sleep(100 * time.Millisecond)
	}
	writeRead(t, c, 50) // r0 misses it
	cl.fab().Resume("r0")
	for c.Connected() != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the replica was not re-dialed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl.fab().Pause("r1")
	defer cl.fab().Resume("r1")
	ctx := ctx5(t)
	if got, err := c.Read(ctx, 1, nil); err != nil || got[0] != 50 {
		t.Fatalf("read through r0 and r2: %v", err)
	}
	writeRead(t, c, 51)
}

// TestNoQuorum: with two replicas of three paused, operations (and
// Dial) fail with ErrNoQuorum and the context's error once the context
// ends, not later.
func TestNoQuorum(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.create(512, 4)
	c := cl.dial()
	writeRead(t, c, 1)
	cl.fab().Pause("r1")
	cl.fab().Pause("r2")
	defer cl.fab().Resume("r1")
	defer cl.fab().Resume("r2")
	check := func(what string, op func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := op(ctx)
		if !errors.Is(err, blockstore.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v", what, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %v with a 200 ms deadline", what, d)
		}
		t.Logf("%s: %v", what, err)
	}
	check("write", func(ctx context.Context) error { return c.Write(ctx, 0, make([]byte, 512)) })
	check("read", func(ctx context.Context) error { _, err := c.Read(ctx, 0, nil); return err })
	check("dial", func(ctx context.Context) error {
		d, err := abdrpc.Dial(ctx, cl.config())
		if err == nil {
			d.Close()
		}
		return err
	})
}

// TestStragglersBounded: operations that return without a paused
// replica's answer leave behind, once their stragglers' linger is over,
// no goroutines beyond the calls its connection holds, and none once it
// is closed.
func TestStragglersBounded(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.create(512, 4)
	c := cl.dial()
	writeRead(t, c, 1)
	before := runtime.NumGoroutine()
	cl.fab().Pause("r2")
	defer cl.fab().Resume("r2")
	ctx := ctx5(t)
	data := make([]byte, 512)
	for i := range 300 {
		if err := c.Write(ctx, uint64(i%4), data); err != nil {
			t.Fatal(err)
		}
	}
	// The stragglers end a millisecond after their phase; then only the
	// abandoned calls' slots wait for the paused replica: at most
	// abdrpc.DefaultSlots of them.
	time.Sleep(50 * time.Millisecond)
	if n := runtime.NumGoroutine(); n > before+abdrpc.DefaultSlots+8 {
		t.Errorf("%d goroutines after 300 writes, %d before", n, before)
	}
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
