package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRSCommands: three `rs replica`s, then create, write, read (text and
// hex), bench and the refusals a user meets first: bad replica lists,
// data longer than a block, an id past the volume, no volume.
func TestRSCommands(t *testing.T) {
	freeAddr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var addrs []string
	served := make(chan int, 3)
	for range 3 {
		addr := freeAddr()
		addrs = append(addrs, addr)
		go func() {
			var out, errs bytes.Buffer
			served <- run(ctx, []string{"rs", "replica", "--listen", addr, "--max-memory", "64MiB"}, &out, &errs)
		}()
	}
	defer func() {
		cancel()
		for range 3 {
			if code := <-served; code != 0 {
				t.Errorf("a replica exited %d", code)
			}
		}
	}()
	replicas := strings.Join(addrs, ",")
	rs := func(args ...string) (string, int) {
		var out, errs bytes.Buffer
		for i := 0; i < 50; i++ { // the replicas may still be starting
			out.Reset()
			errs.Reset()
			code := run(context.Background(), append(append([]string{"rs"}, args...), "--replicas", replicas, "--timeout", "5s"), &out, &errs)
			if code == 0 || !strings.Contains(errs.String(), "quorum") {
				return out.String() + errs.String(), code
			}
			time.Sleep(20 * time.Millisecond)
		}
		return out.String() + errs.String(), -1
	}
	if out, code := rs("read", "0"); code == 0 || !strings.Contains(out, "unknown volume") {
		t.Fatalf("read before create: %d %q", code, out)
	}
	if out, code := rs("create", "--block-size", "1KiB", "--blocks", "600"); code != 0 || !strings.Contains(out, "600 blocks of 1024 bytes") {
		t.Fatalf("create: %d %s", code, out)
	}
	if out, code := rs("write", "7", "hello"); code != 0 {
		t.Fatalf("write: %d %s", code, out)
	}
	if out, code := rs("read", "7"); code != 0 || out != "hello\n" {
		t.Fatalf("read: %d %q", code, out)
	}
	if out, code := rs("read", "7", "--format", "hex"); code != 0 || !strings.HasPrefix(out, "00000000  68 65 6c 6c 6f 00") {
		t.Fatalf("read --format hex: %d %q", code, out)
	}
	if out, code := rs("read", "600"); code == 0 || !strings.Contains(out, "out of range") {
		t.Fatalf("read past the volume: %d %q", code, out)
	}
	if out, code := rs("write", "1", strings.Repeat("x", 1025)); code == 0 || !strings.Contains(out, "block size") {
		t.Fatalf("write of 1025 bytes into 1 KiB blocks: %d %q", code, out)
	}
	out, code := rs("bench", "--workload", "a", "--records", "500", "--duration", "100ms", "--load", "--clients", "2", "--tasks", "4")
	if code != 0 {
		t.Fatalf("bench: %d %s", code, out)
	}
	mustContain(t, out, "loaded 500 blocks", "ops/s", "p50", "round trips", "errors       0")
	// The same replicas serve ABD over RPC (its own copy of each block).
	if out, code := rs("write", "9", "abd", "--design", "abd-rpc"); code != 0 {
		t.Fatalf("write --design abd-rpc: %d %s", code, out)
	}
	if out, code := rs("read", "9", "--design", "abd-rpc"); code != 0 || out != "abd\n" {
		t.Fatalf("read --design abd-rpc: %d %q", code, out)
	}
	out, code = rs("bench", "--design", "abd-rpc", "--workload", "b", "--records", "100", "--duration", "100ms", "--clients", "2", "--tasks", "4")
	if code != 0 {
		t.Fatalf("bench --design abd-rpc: %d %s", code, out)
	}
	mustContain(t, out, "abd-rpc YCSB-b", "ops/s", "errors       0")
	var o, e bytes.Buffer
	for _, bad := range [][]string{
		{"rs", "read", "0", "--replicas", addrs[0] + "," + addrs[1]},                  // an even count
		{"rs", "read", "0", "--replicas", addrs[0] + "," + addrs[0] + "," + addrs[1]}, // a duplicate
		{"rs", "read", "0", "--replicas", replicas, "--design", "nope"},
	} {
		if code := run(context.Background(), bad, &o, &e); code == 0 {
			t.Errorf("%v succeeded", bad)
		}
	}
}

// TestRSReplicaJoin: the operator's workflow: a replica stopped and
// started again with --join becomes a member (a read waits for it with
// another replica stopped), and the blocks written before (both
// designs) read back from it and the last one. (That the copy is what
// keeps them is blockstore/replica's TestRecovery.) A --join list
// without the replica is refused; create leaves a replica restarted
// without --join out of the volume, and says to --join it.
func TestRSReplicaJoin(t *testing.T) {
	var addrs []string
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
	}
	replicas := strings.Join(addrs, ",")
	type served struct {
		stop context.CancelFunc
		code chan int
	}
	serve := func(args ...string) served {
		ctx, cancel := context.WithCancel(context.Background())
		s := served{stop: cancel, code: make(chan int, 1)}
		go func() {
			var out, errs bytes.Buffer
			s.code <- run(ctx, append([]string{"rs", "replica", "--max-memory", "64MiB"}, args...), &out, &errs)
		}()
		return s
	}
	stop := func(s served) {
		s.stop()
		if code := <-s.code; code != 0 {
			t.Errorf("a replica exited %d", code)
		}
	}
	var rs []served
	for _, a := range addrs {
		rs = append(rs, serve("--listen", a))
	}
	defer func() {
		for _, s := range rs[1:] {
			if s.stop != nil {
				stop(s)
			}
		}
	}()
	cli := func(args ...string) (string, int) {
		var out, errs bytes.Buffer
		for i := 0; i < 100; i++ { // replicas starting, or not members yet
			out.Reset()
			errs.Reset()
			code := run(context.Background(), append(append([]string{"rs"}, args...), "--replicas", replicas, "--timeout", "5s"), &out, &errs)
			if code == 0 || !strings.Contains(errs.String(), "quorum") {
				return out.String() + errs.String(), code
			}
			time.Sleep(20 * time.Millisecond)
		}
		return out.String() + errs.String(), -1
	}
	for _, a := range addrs { // every replica must take the volume
		for i := 0; ; i++ {
			c, err := net.Dial("tcp", a)
			if err == nil {
				c.Close()
				break
			}
			if i == 100 {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if out, code := cli("create", "--block-size", "1KiB", "--blocks", "64"); code != 0 {
		t.Fatalf("create: %d %s", code, out)
	}
	for _, design := range []string{"prism-rs", "abd-rpc"} {
		if out, code := cli("write", "5", "kept by "+design, "--design", design); code != 0 {
			t.Fatalf("write --design %s: %d %s", design, code, out)
		}
	}
	var o, e bytes.Buffer
	if code := run(context.Background(), []string{"rs", "replica", "--listen", addrs[0], "--join", addrs[1] + "," + addrs[2] + ",127.0.0.1:1"}, &o, &e); code == 0 ||
		!strings.Contains(e.String(), "--self") {
		t.Fatalf("--join without this replica: %d %q", code, e.String())
	}
	stop(rs[0])
	// Restarted without --join: create leaves it out.
	rs[0] = serve("--listen", addrs[0])
	if out, code := cli("create", "--block-size", "1KiB", "--blocks", "64"); code != 0 || !strings.Contains(out, "it existed") ||
		!strings.Contains(out, "2 of 3 replicas hold it; start the others with 'rdmakit rs replica --join") {
		t.Fatalf("create with a replica restarted empty: %d %s", code, out)
	}
	if out, code := cli("create", "--block-size", "1KiB", "--blocks", "65"); code == 0 || !strings.Contains(out, "another volume exists") {
		t.Fatalf("create of another layout: %d %s", code, out)
	}
	stop(rs[0])
	rs[0] = serve("--listen", addrs[0], "--join", replicas)
	defer stop(rs[0])
	// Once replica 0 is back, stop replica 1: only replica 0's copy and
	// replica 2 are left.
	time.Sleep(100 * time.Millisecond)
	if out, code := cli("read", "5"); code != 0 {
		t.Fatalf("read: %d %s", code, out)
	}
	stop(rs[1])
	rs[1].stop = nil
	for _, design := range []string{"prism-rs", "abd-rpc"} {
		if out, code := cli("read", "5", "--design", design); code != 0 || !strings.HasPrefix(out, "kept by "+design+"\n") {
			t.Fatalf("read --design %s after the rejoin and a stop: %d %q", design, code, out)
		}
	}
}
