package prismrs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestReadWrite: blocks read as zeros until written, then as their
// latest value, from this client and from another that learned the
// layout from the replicas; on loop and over tcp.
func TestReadWrite(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) { testReadWrite(t, newBedOn(t, scheme, 3)) })
	}
}

func testReadWrite(t *testing.T, b *bed) {
	c := b.create(4096, 16)
	ctx := tctx(t)
	if l := c.Layout(); l.BlockSize != 4096 || l.Blocks != 16 || len(l.Replicas) != 3 {
		t.Fatalf("layout %+v", l)
	}
	got, err := c.Read(ctx, 3, nil)
	if err != nil || !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatalf("a block never written: %d bytes, %v", len(got), err)
	}
	for i := range 5 {
		if err := c.Write(ctx, 3, block(4096, byte(i))); err != nil {
			t.Fatal(err)
		}
		got, err := c.Read(ctx, 3, []byte("prefix"))
		if err != nil || string(got[:6]) != "prefix" || !bytes.Equal(got[6:], block(4096, byte(i))) {
			t.Fatalf("write %d: read %d bytes, %v", i, len(got), err)
		}
	}
	d := b.dial()
	if l := d.Layout(); l.BlockSize != 4096 || l.Blocks != 16 {
		t.Fatalf("second client's layout %+v", l)
	}
	if d.ID() == c.ID() {
		t.Errorf("two clients with id %#x", c.ID())
	}
	got, err = d.Read(ctx, 3, nil)
	if err != nil || !bytes.Equal(got, block(4096, 4)) {
		t.Fatalf("second client: %v", err)
	}
	if err := d.Write(ctx, 15, block(4096, 9)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Read(ctx, 15, nil); err != nil || !bytes.Equal(got, block(4096, 9)) {
		t.Fatalf("first client reads the second's write: %v", err)
	}
}

// TestTypedErrors: bad input gets blockstore's typed errors.
func TestTypedErrors(t *testing.T) {
	b := newBed(t, 3)
	c := b.create(512, 4)
	ctx := tctx(t)
	if err := c.Write(ctx, 0, make([]byte, 511)); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("short write: %v", err)
	}
	if err := c.Write(ctx, 4, make([]byte, 512)); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("write past the end: %v", err)
	}
	if _, err := c.Read(ctx, 1<<40, nil); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("read past the end: %v", err)
	}
	c.Close()
	if _, err := c.Read(ctx, 0, nil); !errors.Is(err, blockstore.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if err := c.Write(ctx, 0, make([]byte, 512)); !errors.Is(err, blockstore.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

// TestDialErrors: replica lists that cannot form a volume, replicas
// without a volume or with another one, and unreachable replicas get
// typed errors, promptly.
func TestDialErrors(t *testing.T) {
	b := newBed(t, 3)
	ctx := tctx(t)
	cfg := b.config()
	if _, err := prismrs.Dial(ctx, cfg); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Errorf("no volume yet: %v", err)
	}
	for _, rs := range [][]string{nil, {b.addrs[0], b.addrs[1]}, {b.addrs[0], b.addrs[0], b.addrs[1]}} {
		cfg := b.config()
		cfg.Replicas = rs
		if _, err := prismrs.Dial(ctx, cfg); !errors.Is(err, blockstore.ErrReplicas) {
			t.Errorf("replicas %v: %v", rs, err)
		}
		if _, err := prismrs.Create(ctx, cfg, 512, 1); !errors.Is(err, blockstore.ErrReplicas) {
			t.Errorf("create on replicas %v: %v", rs, err)
		}
	}
	if _, err := prismrs.Create(ctx, b.config(), 500, 1); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("a 500-byte block: %v", err)
	}
	b.create(512, 4)
	if _, err := prismrs.Create(ctx, b.config(), 1024, 4); !errors.Is(err, replica.ErrExists) {
		t.Errorf("creating another volume: %v", err)
	}
	// The same replicas in another order are the same volume.
	cfg = b.config()
	cfg.Replicas = []string{b.addrs[2], b.addrs[0], b.addrs[1]}
	if c, err := prismrs.Dial(ctx, cfg); err != nil || c.Layout().BlockSize != 512 {
		t.Errorf("the replicas in another order: %v", err)
	} else {
		c.Close()
	}
	// A list naming replicas of another volume.
	other := newBed(t, 1)
	cfg = b.config()
	cfg.Replicas = []string{b.addrs[0], b.addrs[1], other.addrs[0]}
	if _, err := prismrs.Dial(ctx, cfg); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Errorf("a list that is not the volume's: %v", err)
	}
	// Unreachable replicas: a majority is needed.
	b.fab().Kill(b.names[0])
	b.fab().Kill(b.names[1])
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := prismrs.Dial(dctx, b.config()); !errors.Is(err, blockstore.ErrNoQuorum) {
		t.Errorf("2 of 3 replicas killed: %v", err)
	}
}

// TestSharedDevice: clients on one device the caller opened leave it
// open when they close; each counts its own phases and lists.
func TestSharedDevice(t *testing.T) {
	b := newBed(t, 3)
	b.create(512, 4)
	dev, err := verbs.Open(b.device("shared"))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx := tctx(t)
	var cs []*prismrs.Client
	for range 2 {
		c, err := prismrs.Dial(ctx, prismrs.Config{Dev: dev, Replicas: b.addrs})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	if err := cs[0].Write(ctx, 1, block(512, 3)); err != nil {
		t.Fatal(err)
	}
	if phases := cs[0].Phases(); phases != 2 {
		t.Errorf("a write took %d phases, want 2", phases)
	}
	if lists := cs[0].RoundTrips(); lists < 4 || lists > 6 {
		t.Errorf("a write posted %d lists, want 4 to 6", lists)
	}
	cs[0].Close()
	if got, err := cs[1].Read(ctx, 1, nil); err != nil || !bytes.Equal(got, block(512, 3)) {
		t.Fatalf("the other client after the first closed: %v", err)
	}
	if phases := cs[1].Phases(); phases != 1 && phases != 2 {
		t.Errorf("a read took %d phases", phases)
	}
}
