package abdrpc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestReadYourWrite: a block never written reads as zeros; a write is
// read back by its writer and by another client, which learned the
// layout from the replicas alone; clients hold distinct ids.
func TestReadYourWrite(t *testing.T) {
	cl := startCluster(t, 3, "secret", nil)
	cl.create(1024, 16)
	a, b := cl.dial(), cl.dial()
	ctx := ctx5(t)
	if l := b.Layout(); l.BlockSize != 1024 || l.Blocks != 16 || len(l.Replicas) != 3 || l.Replicas[1] != cl.addrs[1] {
		t.Fatalf("layout %+v", l)
	}
	if a.ID() == 0 || a.ID() == b.ID() {
		t.Fatalf("client ids %#x and %#x", a.ID(), b.ID())
	}
	got, err := a.Read(ctx, 15, []byte("prefix"))
	if err != nil || string(got[:6]) != "prefix" || !bytes.Equal(got[6:], make([]byte, 1024)) {
		t.Fatalf("a block never written: %d bytes, %v", len(got), err)
	}
	for i := range 3 {
		data := bytes.Repeat([]byte{byte(i + 1)}, 1024)
		if err := a.Write(ctx, 3, data); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*abdrpc.Client{a, b} {
			if got, err := c.Read(ctx, 3, nil); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("write %d read back: %x…, %v", i, got[:min(len(got), 4)], err)
			}
		}
	}
	if err := b.Write(ctx, 3, bytes.Repeat([]byte{9}, 1024)); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Read(ctx, 3, nil); err != nil || got[0] != 9 {
		t.Fatalf("another writer's write: %x…, %v", got[:min(len(got), 4)], err)
	}
}

// TestTypedErrors: bad input gets the typed error, before or after
// reaching the replicas.
func TestTypedErrors(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	ctx := ctx5(t)
	if _, err := abdrpc.Dial(ctx, cl.config()); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Errorf("dial before create: %v", err)
	}
	cfg := cl.config()
	if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: 100, Blocks: 4}); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("create 100-byte blocks: %v", err)
	}
	if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: 512}); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("create 0 blocks: %v", err)
	}
	cl.create(512, 4)
	cl.create(512, 4) // again, same layout
	if err := abdrpc.Create(ctx, cl.config(), blockstore.Layout{BlockSize: 512, Blocks: 5}); !errors.Is(err, replica.ErrExists) {
		t.Errorf("create another layout: %v", err)
	}
	for _, rs := range [][]string{nil, cl.addrs[:2], {cl.addrs[0], cl.addrs[0], cl.addrs[1]}} {
		cfg := cl.config()
		cfg.Replicas = rs
		if _, err := abdrpc.Dial(ctx, cfg); !errors.Is(err, blockstore.ErrReplicas) {
			t.Errorf("dial %v: %v", rs, err)
		}
		if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: 512, Blocks: 4}); !errors.Is(err, blockstore.ErrReplicas) {
			t.Errorf("create on %v: %v", rs, err)
		}
	}
	// The same replicas in another order are the same volume; a list
	// naming another volume's replica is not.
	cfg = cl.config()
	cfg.Replicas = []string{cl.addrs[2], cl.addrs[0], cl.addrs[1]}
	if d, err := abdrpc.Dial(ctx, cfg); err != nil || d.Layout().Blocks != 4 {
		t.Errorf("the replicas in another order: %v", err)
	} else {
		d.Close()
	}
	other := startCluster(t, 1, "", nil)
	other.create(512, 4)
	cfg = cl.config()
	cfg.Replicas = []string{cl.addrs[0], cl.addrs[1], other.addrs[0]}
	if _, err := abdrpc.Dial(ctx, cfg); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Errorf("a list that is not the volume's: %v", err)
	}
	c := cl.dial()
	if err := c.Write(ctx, 0, make([]byte, 511)); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("write 511 bytes: %v", err)
	}
	if err := c.Write(ctx, 4, make([]byte, 512)); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("write block 4 of 4: %v", err)
	}
	if _, err := c.Read(ctx, 1<<40, nil); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("read block 2^40: %v", err)
	}
	c.Close()
	if _, err := c.Read(ctx, 0, nil); !errors.Is(err, blockstore.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestWrongToken: replicas refuse a client without their token.
func TestWrongToken(t *testing.T) {
	cl := startCluster(t, 3, "right", nil)
	cl.create(512, 4)
	cfg := cl.config()
	cfg.Token = "wrong"
	if _, err := abdrpc.Dial(ctx5(t), cfg); !errors.Is(err, blockstore.ErrNoQuorum) {
		t.Fatalf("dial with the wrong token: %v", err)
	}
}

// TestGarbage: a replica answering what no replica sends is
// ErrProtocol when the operation needs it, and outvoted when a
// majority of correct replicas answers.
func TestGarbage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer map[uint16][]byte
		write  bool
	}{
		{"short-read", map[uint16][]byte{replica.MethodRead: {1, 2, 3}}, false},
		{"long-read", map[uint16][]byte{replica.MethodRead: make([]byte, 8+513)}, false},
		{"short-tag", map[uint16][]byte{replica.MethodReadTag: {1}}, true},
		{"bad-ack", map[uint16][]byte{replica.MethodReadTag: u64(0, 0), replica.MethodWrite: u64(0, 1)}, true},
		{"ack-flag", map[uint16][]byte{replica.MethodReadTag: u64(0, 0), replica.MethodWrite: append(u64(0, 0), 7)}, true},
		{"lying-ack", map[uint16][]byte{replica.MethodReadTag: u64(0, 0), replica.MethodWrite: append(u64(uint64(replica.MakeTag(9, 1)), 0), 1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cl *cluster
			cl = startCluster(t, 1, "", func(int) memnode.NewServiceFunc { return liarService(func() []string { return cl.addrs }, tc.answer) })
			c := cl.dial()
			ctx := ctx5(t)
			var err error
			if tc.write {
				err = c.Write(ctx, 0, make([]byte, 512))
			} else {
				_, err = c.Read(ctx, 0, nil)
			}
			if !errors.Is(err, blockstore.ErrProtocol) {
				t.Fatalf("%v", err)
			}
		})
	}
	// One liar of three: the two others are a majority.
	var cl *cluster
	cl = startCluster(t, 3, "", func(i int) memnode.NewServiceFunc {
		if i != 2 {
			return nil
		}
		return liarService(func() []string { return cl.addrs }, map[uint16][]byte{replica.MethodRead: {1}, replica.MethodReadTag: {1}, replica.MethodWrite: {1}})
	})
	ctx := ctx5(t)
	// Create on the two real replicas (the liar refuses MethodCreate).
	if err := abdrpc.Create(ctx, cl.config(), blockstore.Layout{BlockSize: 512, Blocks: 1}); err != nil {
		t.Fatal(err)
	}
	c := cl.dial()
	for i := range 20 {
		if err := c.Write(ctx, 0, bytes.Repeat([]byte{byte(i)}, 512)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got, err := c.Read(ctx, 0, nil); err != nil || got[0] != byte(i) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
}

// TestConcurrentWriters: writers racing on one block leave every
// client reading one of their values, the same one, once they stop.
func TestConcurrentWriters(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.create(512, 2)
	const writers = 6
	cs := make([]*abdrpc.Client, writers)
	for i := range cs {
		cs[i] = cl.dial()
	}
	ctx := ctx5(t)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			for j := range 50 {
				if err := c.Write(ctx, 1, bytes.Repeat([]byte{byte(i*50 + j + 1)}, 512)); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	want, err := cs[0].Read(ctx, 1, nil)
	if err != nil || want[0] == 0 || !bytes.Equal(want, bytes.Repeat(want[:1], 512)) {
		t.Fatalf("after the race: %x…, %v", want[:min(len(want), 4)], err)
	}
	for i, c := range cs {
		if got, err := c.Read(ctx, 1, nil); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("client %d reads %x…, client 0 %x…: %v", i, got[:min(len(got), 4)], want[:4], err)
		}
	}
	if got, err := cs[1].Read(ctx, 0, nil); err != nil || !bytes.Equal(got, make([]byte, 512)) {
		t.Fatalf("the other block: %v", err)
	}
}

// TestCloseInFlight: Close ends operations waiting for replicas that
// do not answer, and returns within a second.
func TestCloseInFlight(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.create(512, 4)
	c := cl.dial()
	cl.fab().Pause("r0")
	cl.fab().Pause("r1")
	defer cl.fab().Resume("r0")
	defer cl.fab().Resume("r1")
	done := make(chan error, 1)
	go func() { done <- c.Write(context.Background(), 0, make([]byte, 512)) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case err := <-done:
		if !errors.Is(err, blockstore.ErrClosed) {
			t.Errorf("the write in flight: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the write in flight still waits after Close")
	}
}

// TestCreateMajority: a volume is created when a majority of the
// replicas can take it, and not otherwise.
func TestCreateMajority(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.srvs[2].Close()
	cl.create(512, 8)
	writeRead(t, cl.dial(), 3)

	cl = startCluster(t, 3, "", nil)
	cl.srvs[1].Close()
	cl.srvs[2].Close()
	err := abdrpc.Create(ctx5(t), cl.config(), blockstore.Layout{BlockSize: 512, Blocks: 8})
	if !errors.Is(err, blockstore.ErrNoQuorum) {
		t.Fatalf("create with 2 of 3 replicas gone: %v", err)
	}
}

// TestClaimRetried: a client whose id a replica refuses claims another.
func TestClaimRetried(t *testing.T) {
	var mu sync.Mutex
	var ids [][]byte
	var cl *cluster
	cl = startCluster(t, 1, "", func(int) memnode.NewServiceFunc {
		return func(dev verbs.Device, pd verbs.PD) (memnode.Service, error) {
			ns := liarService(func() []string { return cl.addrs }, nil)
			s, err := ns(dev, pd)
			if err != nil {
				return nil, err
			}
			s.(*liar).claim = func(req []byte) error {
				mu.Lock()
				defer mu.Unlock()
				ids = append(ids, append([]byte(nil), req...))
				if len(ids) <= 3 {
					return replica.ErrIDTaken
				}
				return nil
			}
			return s, nil
		}
	})
	c := cl.dial()
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 4 || c.ID() != binary.LittleEndian.Uint32(ids[3]) {
		t.Fatalf("claims %x, client id %#x", ids, c.ID())
	}
	for i := range 3 {
		if bytes.Equal(ids[i], ids[3]) {
			t.Errorf("the refused id %x claimed again", ids[i])
		}
	}
}

// TestSharedDevice: clients of one process share a device (Config.Dev):
// each sees the others' writes, Close of one leaves the device and the
// other client working, and the device closes cleanly once both are
// closed.
func TestSharedDevice(t *testing.T) {
	cl := startCluster(t, 3, "", nil)
	cl.create(512, 4)
	dev, err := verbs.Open(fmt.Sprintf("loop://%s/shared", cl.fabric))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cl.config()
	cfg.Dev = dev
	a, err := abdrpc.Dial(ctx5(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := abdrpc.Dial(ctx5(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 512)
	if err := a.Write(ctx5(t), 1, data); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close of a client on a shared device: %v", err)
	}
	if got, err := b.Read(ctx5(t), 1, nil); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the other client after the first closed: %v, %v", got[:min(4, len(got))], err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("the shared device: %v", err)
	}
}
