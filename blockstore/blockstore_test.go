package blockstore_test

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/blockstore"
)

func TestLayoutCheck(t *testing.T) {
	rs := []string{"a:1", "b:1", "c:1"}
	for _, c := range []struct {
		l    blockstore.Layout
		want error
	}{
		{blockstore.Layout{BlockSize: 4096, Blocks: 10, Replicas: rs}, nil},
		{blockstore.Layout{BlockSize: 511, Blocks: 10, Replicas: rs}, blockstore.ErrBlockSize},
		{blockstore.Layout{BlockSize: 64<<10 + 1, Blocks: 10, Replicas: rs}, blockstore.ErrBlockSize},
		{blockstore.Layout{BlockSize: 512, Blocks: 0, Replicas: rs}, blockstore.ErrOutOfRange},
		{blockstore.Layout{BlockSize: 512, Blocks: blockstore.MaxBlocks + 1, Replicas: rs}, blockstore.ErrOutOfRange},
		{blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: rs[:2]}, blockstore.ErrReplicas},
		{blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: []string{"a:1", "b:1", "a:1"}}, blockstore.ErrReplicas},
		{blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: []string{"a:1", "", "c:1"}}, blockstore.ErrReplicas},
		{blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}}, blockstore.ErrReplicas},
	} {
		if err := c.l.Check(); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%+v: %v, want %v", c.l, err, c.want)
		}
	}
}

func TestCheckOp(t *testing.T) {
	l := blockstore.Layout{BlockSize: 1024, Blocks: 4}
	if err := l.CheckOp(3, 1024); err != nil {
		t.Errorf("a write of the last block: %v", err)
	}
	if err := l.CheckOp(3, -1); err != nil {
		t.Errorf("a read of the last block: %v", err)
	}
	if err := l.CheckOp(4, -1); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("a read past the end: %v", err)
	}
	if err := l.CheckOp(0, 1023); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("a short write: %v", err)
	}
}

func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 3: 2, 5: 3, 7: 4} {
		if got := blockstore.Quorum(n); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", n, got, want)
		}
	}
}
