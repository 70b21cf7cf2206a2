package prismrs_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/blockstore"
)

// TestReadWrite: blocks read as zeros until written, then as their
// latest value, from this client and from another that learned the
// layout from the replicas.
func TestReadWrite(t *testing.T) {
	b := newBed(t, 3)
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
	if c.WriteBacks() != 0 || d.WriteBacks() != 0 {
		t.Errorf("write-backs %d, %d without concurrency or faults", c.WriteBacks(), d.WriteBacks())
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
