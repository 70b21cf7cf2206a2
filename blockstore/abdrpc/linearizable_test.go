package abdrpc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/check"
)

// value is the block a write of v writes: v, then a byte of v repeated,
// so that a torn block is seen.
func value(v uint64, bs int) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, bs), v)
	return append(b, bytes.Repeat([]byte{byte(v) | 1}, bs-8)...)
}

// decode is the value a block holds ("" for zeros), or an error when it
// is no value's block.
func decode(b []byte) (string, error) {
	v := binary.LittleEndian.Uint64(b)
	if v == 0 && bytes.Equal(b, make([]byte, len(b))) {
		return "", nil
	}
	if !bytes.Equal(b, value(v, len(b))) {
		return "", fmt.Errorf("a torn block: %x…", b[:16])
	}
	return strconv.FormatUint(v, 16), nil
}

// TestLinearizable: 16 clients read and write 8 blocks (a register
// each) while the replicas are paused one at a time, briefly and once
// long enough for the clients to lose and re-dial their connections
// (every operation must succeed: a majority is always up);
// porcupine checks the history of over 5,000 operations against a
// register per block (check.KVModel, a key per block).
func TestLinearizable(t *testing.T) {
	const (
		clients = 16
		blocks  = 8
		perC    = 320 // operations per client at least: they go on until the faults are over
		bs      = 512
		pace    = 4 * time.Millisecond
	)
	cl := startCluster(t, 3, "", nil)
	cl.create(bs, blocks)
	cs := make([]*clientT, clients)
	for i := range cs {
		cs[i] = &clientT{c: cl.dial(), i: i}
	}
	h := check.NewKVHistory()
	var failed, lost atomic.Int64
	faults := make(chan struct{})
	go func() { // one replica paused at a time: briefly, then long enough to lose connections, then briefly
		defer close(faults)
		f := cl.fab()
		for i, d := range []time.Duration{100, 100, 100, 2500, 100, 100, 100} {
			r := fmt.Sprintf("r%d", i%3)
			f.Pause(r)
			time.Sleep(d * time.Millisecond)
			if d > 100 {
				lost.Store(int64(clients - upAll(cs)))
			}
			f.Resume(r)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c.i), 1))
			for j := 0; ; j++ {
				if j >= perC {
					select {
					case <-faults:
						return
					default:
					}
				}
				id := rng.Uint64N(blocks)
				if rng.IntN(2) == 0 {
					c.write(t, h, id, uint64(c.i+1)<<32|uint64(j+1), bs, &failed)
				} else {
					c.read(t, h, id, &failed)
				}
				time.Sleep(pace)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d operations failed with one replica of three down at a time", n)
	}
	if lost.Load() == 0 {
		t.Error("no client lost its connection to the replica paused for 2.5 s")
	}
	for deadline := time.Now().Add(3 * time.Second); upAll(cs) != clients; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d clients re-dialed every replica", upAll(cs), clients)
		}
	}
	if h.Len() < 5000 {
		t.Fatalf("%d operations recorded", h.Len())
	}
	res, info := h.Check(60 * time.Second)
	if res != porcupine.Ok {
		t.Fatalf("%d operations: %v (%d partial linearizations)", h.Len(), res, len(info.PartialLinearizations()))
	}
	t.Logf("%d operations, linearizable; %d clients lost a connection and re-dialed", h.Len(), lost.Load())
}

// clientT is one client of TestLinearizable.
type clientT struct {
	c interface {
		Read(context.Context, uint64, []byte) ([]byte, error)
		Write(context.Context, uint64, []byte) error
		Connected() int
	}
	i   int
	buf []byte
}

func (c *clientT) write(t *testing.T, h *check.KVHistory, id, v uint64, bs int, failed *atomic.Int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in := check.KVInput{Kind: check.KVPut, Key: strconv.FormatUint(id, 10), Value: strconv.FormatUint(v, 16)}
	call := h.Now()
	err := c.c.Write(ctx, id, value(v, bs))
	ret := h.Now()
	if err != nil {
		failed.Add(1)
		t.Logf("client %d: %v", c.i, err)
	}
	h.Add(c.i, in, check.KVOutput{}, call, ret, err != nil)
}

func (c *clientT) read(t *testing.T, h *check.KVHistory, id uint64, failed *atomic.Int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	call := h.Now()
	b, err := c.c.Read(ctx, id, c.buf[:0])
	ret := h.Now()
	if err != nil {
		failed.Add(1)
		t.Logf("client %d: %v", c.i, err)
		return
	}
	c.buf = b
	v, err := decode(b)
	if err != nil {
		t.Errorf("client %d, block %d: %v", c.i, id, err)
		return
	}
	h.Add(c.i, check.KVInput{Kind: check.KVGet, Key: strconv.FormatUint(id, 10)}, check.KVOutput{Value: v, Found: v != ""}, call, ret, false)
}

// upAll is how many of the clients are connected to every replica.
func upAll(cs []*clientT) int {
	n := 0
	for _, c := range cs {
		if c.c.Connected() == 3 {
			n++
		}
	}
	return n
}

// TestWriteBackNeeded is the negative control: a write that reached one
// replica of three before its writer died, a read through that replica
// and another, then a read through the two others. With the write-back
// the second read returns the partial write's value too, and the
// history is linearizable; without it (abdrpc.SkipWriteBack) the second
// read returns the older value, and porcupine finds the history
// illegal.
func TestWriteBackNeeded(t *testing.T) {
	for _, writeBack := range []bool{true, false} {
		t.Run(fmt.Sprintf("write-back=%v", writeBack), func(t *testing.T) {
			cl := startCluster(t, 3, "", nil)
			cl.create(512, 1)
			w, a, b := cl.dial(), cl.dialAs("a"), cl.dialAs("b")
			if !writeBack {
				abdrpc.SkipWriteBack(a)
				abdrpc.SkipWriteBack(b)
			}
			h := check.NewKVHistory()
			ctx := ctx5(t)
			rec := func(client int, in check.KVInput, out check.KVOutput, call int64, unknown bool) {
				h.Add(client, in, out, call, h.Now(), unknown)
			}
			read := func(client int, c *abdrpc.Client) string {
				call := h.Now()
				got, err := c.Read(ctx, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				v, err := decode(got)
				if err != nil {
					t.Fatal(err)
				}
				rec(client, check.KVInput{Kind: check.KVGet, Key: "0"}, check.KVOutput{Value: v, Found: v != ""}, call, false)
				return v
			}
			call := h.Now()
			if err := w.Write(ctx, 0, value(1, 512)); err != nil {
				t.Fatal(err)
			}
			rec(0, check.KVInput{Kind: check.KVPut, Key: "0", Value: "1"}, check.KVOutput{}, call, false)
			// The writer that died: its write's outcome is unknown.
			rec(1, check.KVInput{Kind: check.KVPut, Key: "0", Value: "2"}, check.KVOutput{}, h.Now(), true)
			cl.rawWrite(0, 0, replica.MakeTag(1000, 1), value(2, 512))
			f := cl.fab()
			f.Partition("a", "r2") // a reads through r0 and r1
			if v := read(2, a); v != "2" {
				t.Fatalf("the read through the partly written replica: %q", v)
			}
			f.Partition("b", "r0") // b reads through r1 and r2
			v := read(3, b)
			res, _ := h.Check(10 * time.Second)
			switch {
			case writeBack && (v != "2" || res != porcupine.Ok):
				t.Fatalf("with the write-back: the later read returns %q, history %v", v, res)
			case !writeBack && (v != "1" || res != porcupine.Illegal):
				t.Fatalf("without the write-back: the later read returns %q, history %v (want the older value, Illegal)", v, res)
			}
		})
	}
}

// TestSharedClientLinearizable: goroutines share clients (a Store is safe
// for concurrent use), so one client's writes of one block overlap: they
// read the same latest timestamp and must still write with different
// tags. With ⟨timestamp+1, client id⟩ for both, the replicas could hold
// one tag with two values and reads that agree on the tag disagree on
// the data (porcupine found it every run).
func TestSharedClientLinearizable(t *testing.T) {
	const (
		clients    = 2
		goroutines = 8 // per client
		blocks     = 2
		perG       = 150
		bs         = 512
	)
	cl := startCluster(t, 3, "", nil)
	cl.create(bs, blocks)
	h := check.NewKVHistory()
	var failed atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		c := cl.dial()
		for g := range goroutines {
			ct := &clientT{c: c, i: i*goroutines + g}
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(ct.i), 2))
				for j := range perG {
					id := rng.Uint64N(blocks)
					if rng.IntN(2) == 0 {
						ct.write(t, h, id, uint64(ct.i+1)<<32|uint64(j+1), bs, &failed)
					} else {
						ct.read(t, h, id, &failed)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d operations failed", n)
	}
	res, info := h.Check(60 * time.Second)
	if res != porcupine.Ok {
		t.Fatalf("%d operations: %v (%d partial linearizations)", h.Len(), res, len(info.PartialLinearizations()))
	}
}
