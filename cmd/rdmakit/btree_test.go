package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
)

// startBTreeServe runs `rdmakit btree serve` with args in this process
// and returns the address clients dial; it stops when the test ends.
func startBTreeServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		c := run(ctx, append([]string{"btree", "serve", "--listen", "127.0.0.1:0"}, args...), pw, stderr)
		pw.Close()
		code <- c
	}()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("btree serve exited %d: %s", c, stderr.String())
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("btree serve: %v: %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`connect to (\S+) `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("btree serve printed %q", line)
	}
	return m[1]
}

// rdmakit runs a command line and returns its exit code and outputs.
func rdmakit(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	c := run(context.Background(), args, &out, &errb)
	return c, out.String(), errb.String()
}

// TestBTreeCommands: put, get, del and scan against a node of each
// design, and a short bench with a load.
func TestBTreeCommands(t *testing.T) {
	for _, design := range []string{"sherman", "rpc"} {
		t.Run(design, func(t *testing.T) {
			node := startBTreeServe(t, "--design", design, "--mem", "8MiB", "--token", "s3cret")
			cl := func(args ...string) (int, string, string) {
				return rdmakit(append(args, "--design", design, "--node", node, "--token", "s3cret")...)
			}
			for _, kv := range [][2]string{{"pear", "green"}, {"apple", "red"}, {"fig", "purple"}, {"apple", "yellow"}} {
				if c, _, e := cl("btree", "put", kv[0], kv[1]); c != 0 {
					t.Fatalf("put %v: %d %s", kv, c, e)
				}
			}
			if c, out, e := cl("btree", "get", "apple"); c != 0 || out != "yellow\n" {
				t.Fatalf("get apple: %d %q %s", c, out, e)
			}
			if c, _, e := cl("btree", "del", "pear"); c != 0 {
				t.Fatalf("del: %d %s", c, e)
			}
			if c, _, e := cl("btree", "get", "pear"); c != 1 || !strings.Contains(e, "not found") {
				t.Fatalf("get of a deleted key: %d %s", c, e)
			}
			if c, out, e := cl("btree", "scan", "--from", "b"); c != 0 || out != "fig\tpurple\n" {
				t.Fatalf("scan --from b: %d %q %s", c, out, e)
			}
			if c, out, e := cl("btree", "scan", "--limit", "1"); c != 0 || out != "apple\tyellow\n" {
				t.Fatalf("scan --limit 1: %d %q %s", c, out, e)
			}
			c, out, e := cl("btree", "bench", "--workload", "e", "--load", "--records", "2000", "--tasks", "4", "--duration", "200ms")
			if c != 0 || !strings.Contains(out, "loaded 2000 records") || !strings.Contains(out, "errors       0") {
				t.Fatalf("bench: %d %s %s", c, out, e)
			}
			if c, _, e := rdmakit("btree", "get", "apple", "--design", design, "--node", node, "--token", "wrong", "--timeout", "3s"); c != 1 || e == "" {
				t.Fatalf("a wrong token: %d %s", c, e)
			}
		})
	}
}

// TestBTreeSmart: a Smart-BT client (--smart) and a Sherman+ one work
// on the same node as a plain Sherman client: one's writes are the
// other's reads, and bench reports Smart's configuration.
func TestBTreeSmart(t *testing.T) {
	node := startBTreeServe(t, "--design", "sherman", "--mem", "8MiB")
	cl := func(args ...string) (int, string, string) { return rdmakit(append(args, "--node", node)...) }
	if c, _, e := cl("btree", "put", "apple", "red", "--smart", "all"); c != 0 {
		t.Fatalf("smart put: %d %s", c, e)
	}
	if c, out, e := cl("btree", "get", "apple"); c != 0 || out != "red\n" {
		t.Fatalf("plain get after a smart put: %d %q %s", c, out, e)
	}
	if c, _, e := cl("btree", "put", "apple", "green"); c != 0 {
		t.Fatalf("plain put: %d %s", c, e)
	}
	for _, tech := range []string{"all", "none", "spec", "throttling,backoff,coroutine"} {
		if c, out, e := cl("btree", "get", "apple", "--smart", tech, "--workers", "2"); c != 0 || out != "green\n" {
			t.Fatalf("get --smart %s: %d %q %s", tech, c, out, e)
		}
	}
	c, out, e := cl("btree", "bench", "--workload", "b", "--load", "--records", "2000", "--tasks", "6", "--duration", "200ms", "--smart", "all", "--workers", "2")
	if c != 0 || !strings.Contains(out, "sherman on Smart (throttling+backoff+coroutine-throttle+spec-lookup; 2 workers × 3 tasks) YCSB-b") || !strings.Contains(out, "errors       0") {
		t.Fatalf("smart bench: %d %s %s", c, out, e)
	}
}

// TestBTreeFlagErrors: bad flags are refused before anything connects.
func TestBTreeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"btree", "serve", "--design", "bwtree"}, `--design "bwtree"`},
		{[]string{"btree", "get", "k", "--design", "hash"}, `--design "hash"`},
		{[]string{"btree", "serve", "--mem", "lots"}, "--mem"},
		{[]string{"btree", "scan", "--limit", "-1"}, "--limit -1"},
		{[]string{"btree", "bench", "--tasks", "0"}, "--tasks 0"},
		{[]string{"btree", "get", "k", "--smart", "warp"}, `--smart "warp": want all, none or a comma list of backoff, coroutine, spec, throttling`},
		{[]string{"btree", "get", "k", "--smart", "all", "--design", "rpc"}, "--smart is for --design sherman"},
		{[]string{"btree", "get", "k", "--workers", "2"}, "--workers and --wr-limit need --smart"},
		{[]string{"btree", "bench", "--smart", "spec", "--wr-limit", "8"}, "--wr-limit 8 needs throttling"},
		{[]string{"btree", "bench", "--smart", "all", "--workers", "-1"}, "--workers -1"},
	} {
		code, _, e := rdmakit(c.args...)
		if code != 1 || !strings.Contains(e, c.want) {
			t.Errorf("%v: exit %d, %q; want 1 and %q", c.args, code, e, c.want)
		}
	}
}
