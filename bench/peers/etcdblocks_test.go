package peers

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
)

// etcdCluster starts a 3-member cluster for a test, stopped at its end.
func etcdCluster(t *testing.T) *Etcd {
	t.Helper()
	need(t, "etcd", "etcd")
	e, err := StartEtcd(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func TestEtcdBlocks(t *testing.T) {
	e := etcdCluster(t)
	ctx := t.Context()
	const size, blocks = 4096, 16
	s, err := CreateEtcdBlocks(ctx, e.Endpoints, "vol1", size, blocks)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if l := s.Layout(); l.BlockSize != size || l.Blocks != blocks || len(l.Replicas) != 3 {
		t.Errorf("layout %+v", l)
	}
	// A block never written reads as zeros, appended to dst.
	got, err := s.Read(ctx, 3, []byte("x"))
	if err != nil || len(got) != 1+size || got[0] != 'x' || !bytes.Equal(got[1:], make([]byte, size)) {
		t.Fatalf("unwritten block: %d bytes, %v", len(got), err)
	}
	data := bytes.Repeat([]byte{0xA5, 0x01}, size/2)
	trips := s.RoundTrips()
	if err := s.Write(ctx, 3, data); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Read(ctx, 3, nil); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after write: %v", err)
	}
	if d := s.RoundTrips() - trips; d != 2 {
		t.Errorf("a write and a read took %d round trips, want 2", d)
	}

	// A second client finds the volume by its prefix and sees the write.
	s2, err := OpenEtcdBlocks(ctx, e.Endpoints, "vol1")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Layout().BlockSize != size || s2.Layout().Blocks != blocks {
		t.Errorf("opened layout %+v", s2.Layout())
	}
	if got, err = s2.Read(ctx, 3, nil); err != nil || !bytes.Equal(got, data) {
		t.Errorf("second client's read: %v", err)
	}
	// Creating the same volume again is opening it; another is refused.
	if s3, err := CreateEtcdBlocks(ctx, e.Endpoints, "vol1", size, blocks); err != nil {
		t.Errorf("create the same volume again: %v", err)
	} else {
		s3.Close()
	}
	if _, err := CreateEtcdBlocks(ctx, e.Endpoints, "vol1", 512, blocks); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Errorf("create another volume under the same prefix: %v, want ErrNoVolume", err)
	}
	if _, err := OpenEtcdBlocks(ctx, e.Endpoints, "none"); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Errorf("open a missing volume: %v, want ErrNoVolume", err)
	}
}

func TestEtcdBlocksBadInput(t *testing.T) {
	e := etcdCluster(t)
	ctx := t.Context()
	if _, err := CreateEtcdBlocks(ctx, e.Endpoints, "v", 100, 8); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("100-byte blocks: %v, want ErrBlockSize", err)
	}
	if _, err := CreateEtcdBlocks(ctx, append(e.Endpoints, e.Endpoints[0]), "v", 512, 8); !errors.Is(err, blockstore.ErrReplicas) {
		t.Errorf("duplicate endpoint: %v, want ErrReplicas", err)
	}
	s, err := CreateEtcdBlocks(ctx, e.Endpoints, "v", 512, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, 0, make([]byte, 511)); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("short write: %v, want ErrBlockSize", err)
	}
	if err := s.Write(ctx, 8, make([]byte, 512)); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("write past the end: %v, want ErrOutOfRange", err)
	}
	if _, err := s.Read(ctx, 1<<40, nil); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("read past the end: %v, want ErrOutOfRange", err)
	}
	// A value of the wrong size under a block's key is a protocol error.
	if _, err := s.c.Put(ctx, s.key(5), "short"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, 5, nil); !errors.Is(err, blockstore.ErrProtocol) {
		t.Errorf("read of a 5-byte value: %v, want ErrProtocol", err)
	}
	if _, err := s.c.Put(ctx, "bad/layout", "4096 x"); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEtcdBlocks(ctx, e.Endpoints, "bad"); !errors.Is(err, blockstore.ErrProtocol) {
		t.Errorf("open a garbled layout: %v, want ErrProtocol", err)
	}
	s.Close()
	if _, err := s.Read(ctx, 0, nil); !errors.Is(err, blockstore.ErrClosed) {
		t.Errorf("read after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// With two of three members gone, no majority answers: operations end
// with ErrNoQuorum at their deadline instead of hanging.
func TestEtcdBlocksNoQuorum(t *testing.T) {
	e := etcdCluster(t)
	ctx := t.Context()
	s, err := CreateEtcdBlocks(ctx, e.Endpoints, "v", 512, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(ctx, 1, make([]byte, 512)); err != nil {
		t.Fatal(err)
	}
	e.members[1].stop()
	e.members[2].stop()
	for _, op := range []string{"read", "write"} {
		octx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		start := time.Now()
		if op == "read" {
			_, err = s.Read(octx, 1, nil)
		} else {
			err = s.Write(octx, 1, make([]byte, 512))
		}
		cancel()
		if !errors.Is(err, blockstore.ErrNoQuorum) {
			t.Errorf("%s with one member of three: %v, want ErrNoQuorum", op, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %v past its 500 ms deadline", op, d)
		}
	}
}
