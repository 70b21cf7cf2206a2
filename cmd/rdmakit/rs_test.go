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
