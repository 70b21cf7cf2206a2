package replica_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/rpc"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var seq atomic.Int64

// start serves one replica on a fresh loop fabric and returns an RPC
// client of it (dial makes more).
func start(t *testing.T, cfg replica.Config) (srv *memnode.Server, dial func() *rpc.Client) {
	srv, dialC := startC(t, cfg)
	return srv, func() *rpc.Client { c, _ := dialC(); return c }
}

// startC is start whose dial also returns what closes the client's
// connection.
func startC(t *testing.T, cfg replica.Config) (srv *memnode.Server, dial func() (*rpc.Client, func())) {
	t.Helper()
	fabric := fmt.Sprintf("replica-test-%d", seq.Add(1))
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + fabric + "/r", CM: "127.0.0.1:0",
		Probe: 5 * time.Millisecond, Metrics: "127.0.0.1:0", NewService: replica.Service(cfg, nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	n := 0
	dial = func() (*rpc.Client, func()) {
		n++
		dev, err := verbs.Open(fmt.Sprintf("loop://%s/c%d", fabric, n))
		if err != nil {
			t.Fatal(err)
		}
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(256)
		conn, err := cm.Dial(context.Background(), dev, srv.Info().CM, replica.DialOptions(pd, cq, "", 0))
		if err != nil {
			t.Fatal(err)
		}
		c, err := rpc.NewClient(pd, conn.QP(), cq, rpc.ClientConfig{MaxMessage: replica.MaxMessage(blockstore.MaxBlockSize), Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		closeAll := func() { c.Close(); conn.Close(); dev.Close() }
		t.Cleanup(closeAll)
		return c, closeAll
	}
	return srv, dial
}

func call(c *rpc.Client, method uint16, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp := make([]byte, replica.MaxMessage(blockstore.MaxBlockSize))
	n, err := c.Call(ctx, method, req, resp)
	return resp[:n], replica.MapErr(err)
}

func u64s(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// TestCreateAndInfo: a replica holds no volume until created; create is
// idempotent for the same layout and refuses another; every client
// learns the layout; bad layouts get typed errors.
func TestCreateAndInfo(t *testing.T) {
	_, dial := start(t, replica.Config{MaxMemory: 64 << 20})
	c := dial()
	if _, err := call(c, replica.MethodInfo, nil); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Fatalf("info before create: %v", err)
	}
	if _, err := call(c, replica.MethodRead, u64s(0)); !errors.Is(err, blockstore.ErrNoVolume) {
		t.Fatalf("read before create: %v", err)
	}
	l := blockstore.Layout{BlockSize: 4096, Blocks: 64, Replicas: []string{"a:1", "b:2", "c:3"}}
	req, err := replica.MarshalLayout(l)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		b, err := call(c, replica.MethodCreate, req)
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		in, err := replica.UnmarshalInfo(b)
		if err != nil || in.Layout.BlockSize != 4096 || in.Layout.Blocks != 64 || len(in.Layout.Replicas) != 3 || in.BufSize != 8192 {
			t.Fatalf("create %d: %+v, %v", i, in, err)
		}
	}
	b, err := call(dial(), replica.MethodInfo, nil)
	if in, err2 := replica.UnmarshalInfo(b); err != nil || err2 != nil || in.Layout.Replicas[2] != "c:3" {
		t.Fatalf("info: %+v %v %v", in, err, err2)
	}
	other := l
	other.Blocks = 65
	req2, _ := replica.MarshalLayout(other)
	if _, err := call(c, replica.MethodCreate, req2); !errors.Is(err, replica.ErrExists) {
		t.Errorf("another layout: %v", err)
	}
	for _, bad := range []struct {
		l    blockstore.Layout
		want error
	}{
		{blockstore.Layout{BlockSize: 100, Blocks: 1, Replicas: []string{"a"}}, blockstore.ErrBlockSize},
		{blockstore.Layout{BlockSize: 512, Blocks: 0, Replicas: []string{"a"}}, blockstore.ErrOutOfRange},
		{blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: []string{"a", "a", "b"}}, blockstore.ErrReplicas},
		{blockstore.Layout{BlockSize: 512, Blocks: 1, Replicas: []string{"a", "b"}}, blockstore.ErrReplicas},
	} {
		_, dial := start(t, replica.Config{})
		req, _ := replica.MarshalLayout(bad.l)
		if _, err := call(dial(), replica.MethodCreate, req); !errors.Is(err, bad.want) {
			t.Errorf("%+v: %v, want %v", bad.l, err, bad.want)
		}
	}
	// Too large for the replica's memory.
	_, dial2 := start(t, replica.Config{MaxMemory: 1 << 20})
	big, _ := replica.MarshalLayout(blockstore.Layout{BlockSize: 4096, Blocks: 4096, Replicas: []string{"a"}})
	if _, err := call(dial2(), replica.MethodCreate, big); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("a volume larger than the replica: %v", err)
	}
	// Garbage.
	for _, g := range [][]byte{nil, {1, 2, 3}, append(req[:12:12], 9), append(append([]byte(nil), req...), 0)} {
		if _, err := call(dial2(), replica.MethodCreate, g); !errors.Is(err, blockstore.ErrProtocol) && !errors.Is(err, blockstore.ErrReplicas) {
			t.Errorf("create %x: %v", g, err)
		}
	}
}

// TestClaim: a client id belongs to one connection at a time and is
// free again once that connection is gone.
func TestClaim(t *testing.T) {
	srv, dialC := startC(t, replica.Config{})
	dial := func() *rpc.Client { c, _ := dialC(); return c }
	a, closeA := dialC()
	b := dial()
	id := binary.LittleEndian.AppendUint32(nil, 0xabc)
	if _, err := call(a, replica.MethodClaim, id); err != nil {
		t.Fatal(err)
	}
	if _, err := call(a, replica.MethodClaim, id); err != nil {
		t.Fatalf("claiming one's own id again: %v", err)
	}
	if _, err := call(b, replica.MethodClaim, id); !errors.Is(err, replica.ErrIDTaken) {
		t.Fatalf("another's id: %v", err)
	}
	if _, err := call(b, replica.MethodClaim, []byte{1}); !errors.Is(err, blockstore.ErrProtocol) {
		t.Fatalf("a short claim: %v", err)
	}
	// a moves to another id: the first is free.
	if _, err := call(a, replica.MethodClaim, binary.LittleEndian.AppendUint32(nil, 0xdef)); err != nil {
		t.Fatal(err)
	}
	if _, err := call(b, replica.MethodClaim, id); err != nil {
		t.Fatalf("a released id: %v", err)
	}
	closeA()
	c := dial()
	other := binary.LittleEndian.AppendUint32(nil, 0xdef)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := call(c, replica.MethodClaim, other)
		if err == nil {
			break
		}
		if !errors.Is(err, replica.ErrIDTaken) || time.Now().After(deadline) {
			t.Fatalf("the id of a closed connection: %v (stats %+v)", err, srv.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestABDMethods: the RPC phases keep the newest tag's value, answer
// with the tag held before, and refuse bad input with typed errors.
func TestABDMethods(t *testing.T) {
	_, dial := start(t, replica.Config{})
	c := dial()
	l := blockstore.Layout{BlockSize: 512, Blocks: 4, Replicas: []string{"x"}}
	req, _ := replica.MarshalLayout(l)
	if _, err := call(c, replica.MethodCreate, req); err != nil {
		t.Fatal(err)
	}
	data := func(b byte) []byte {
		d := make([]byte, 512)
		for i := range d {
			d[i] = b
		}
		return d
	}
	write := func(id uint64, tag replica.Tag, d []byte) (replica.Tag, bool, error) {
		b, err := call(c, replica.MethodWrite, append(u64s(id, uint64(tag)), d...))
		if err != nil {
			return 0, false, err
		}
		if len(b) != 9 {
			t.Fatalf("write answer %x", b)
		}
		return replica.Tag(binary.LittleEndian.Uint64(b)), b[8] == 1, nil
	}
	if old, ok, err := write(1, replica.MakeTag(2, 7), data('a')); err != nil || !ok || old != 0 {
		t.Fatalf("first write: %v %v %v", old, ok, err)
	}
	if old, ok, err := write(1, replica.MakeTag(1, 9), data('b')); err != nil || ok || old != replica.MakeTag(2, 7) {
		t.Fatalf("an older write: %v %v %v", old, ok, err)
	}
	if old, ok, err := write(1, replica.MakeTag(2, 7), data('c')); err != nil || ok || old != replica.MakeTag(2, 7) {
		t.Fatalf("the same tag again: %v %v %v", old, ok, err)
	}
	b, err := call(c, replica.MethodRead, u64s(1))
	if err != nil || len(b) != 8+512 || replica.Tag(binary.LittleEndian.Uint64(b)) != replica.MakeTag(2, 7) || b[8] != 'a' || b[519] != 'a' {
		t.Fatalf("read: %d bytes %v", len(b), err)
	}
	b, err = call(c, replica.MethodReadTag, u64s(1))
	if err != nil || len(b) != 8 || replica.Tag(binary.LittleEndian.Uint64(b)) != replica.MakeTag(2, 7) {
		t.Fatalf("read tag: %x %v", b, err)
	}
	if b, err := call(c, replica.MethodRead, u64s(0)); err != nil || binary.LittleEndian.Uint64(b) != 0 || b[8] != 0 {
		t.Fatalf("a block never written: %v", err)
	}
	if _, _, err := write(4, 1, data('x')); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("write past the end: %v", err)
	}
	if _, _, err := write(0, 1, data('x')[:100]); !errors.Is(err, blockstore.ErrBlockSize) {
		t.Errorf("a short write: %v", err)
	}
	if _, err := call(c, replica.MethodRead, u64s(1<<40)); !errors.Is(err, blockstore.ErrOutOfRange) {
		t.Errorf("read past the end: %v", err)
	}
	for _, m := range []uint16{replica.MethodRead, replica.MethodReadTag, replica.MethodWrite} {
		if _, err := call(c, m, []byte{1, 2}); !errors.Is(err, blockstore.ErrProtocol) {
			t.Errorf("method %d, 2 bytes: %v", m, err)
		}
	}
}

// TestMetrics: the replica's /metrics count its volume, RPC calls and
// CPU.
func TestMetrics(t *testing.T) {
	srv, dial := start(t, replica.Config{})
	c := dial()
	req, _ := replica.MarshalLayout(blockstore.Layout{BlockSize: 512, Blocks: 4, Replicas: []string{"x"}})
	if _, err := call(c, replica.MethodCreate, req); err != nil {
		t.Fatal(err)
	}
	if _, err := call(c, replica.MethodWrite, append(u64s(2, 5), make([]byte, 512)...)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := call(c, replica.MethodRead, u64s(2)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(srv.Info().Metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"rdmakit_blockstore_blocks 4", "rdmakit_blockstore_block_size_bytes 512",
		`rdmakit_blockstore_rpc_calls_total{method="write"} 1`, `rdmakit_blockstore_rpc_calls_total{method="read"} 3`,
		`rdmakit_blockstore_rpc_calls_total{method="create"} 1`, `rdmakit_blockstore_buffers_total{event="carved"}`,
		`rdmakit_blockstore_cpu_seconds_total{part="rpc"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %q in /metrics", want)
		}
	}
}
