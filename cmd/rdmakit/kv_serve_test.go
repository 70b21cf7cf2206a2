package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/internal/stallproxy"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

var kvFabrics atomic.Int64

// startKVServe runs `rdmakit kv serve` with args in this process and
// returns the address clients dial; the server stops when the test ends.
func startKVServe(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startKVServeMetrics(t, false, args...)
	return addr
}

// startKVServeMetrics is startKVServe that also returns the URL of the
// node's /metrics when metrics (the node serves them).
func startKVServeMetrics(t *testing.T, metrics bool, args ...string) (addr, url string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		c := run(ctx, append([]string{"kv", "serve", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--keys", "1000"}, args...), pw, stderr)
		pw.Close()
		code <- c
	}()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != 0 || t.Failed() {
			t.Errorf("kv serve exited %d: %s", c, stderr.String())
		}
	})
	r := bufio.NewReader(pr)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("kv serve: %v: %s", err, stderr.String())
	}
	m := regexp.MustCompile(`connect to (\S+) `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("kv serve printed %q", line)
	}
	if metrics {
		if line, err = r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "metrics at http://") {
			t.Fatalf("kv serve printed %q, %v", line, err)
		}
		url = strings.TrimSpace(strings.TrimPrefix(line, "metrics at "))
	}
	go io.Copy(io.Discard, r)
	return m[1], url
}

// heap returns the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestKVServeFreesDepartedClients: after 1,000 clients connected, did a
// PUT and left, the node is back to its goroutines and (roughly) heap of
// before: each departed client's QP, CQ and goroutine are freed.
func TestKVServeFreesDepartedClients(t *testing.T) {
	fabric := fmt.Sprintf("loop://kvserve-%d/", kvFabrics.Add(1))
	addr := startKVServe(t, "--store", "prism-kv", "--device", fabric+"node", "--probe", "2ms")
	ctx := context.Background()
	var failed atomic.Int64
	cycle := func(i int) {
		k, err := dialKV(ctx, "prism-kv", fmt.Sprintf("%sc%d", fabric, i), addr, "", 1)
		if err != nil {
			// The client's first RPC can find the node's receives not yet
			// posted and exhaust its RNR retries on a loaded machine: a
			// connection that came and went all the same.
			failed.Add(1)
			return
		}
		if err := k.stores[0].Put(ctx, []byte("k"), []byte("v")); err != nil {
			failed.Add(1)
		}
		k.Close()
	}
	cycle(-1) // warm-up: the node's pools and the runtime's caches
	settle := func() {
		deadline := time.Now().Add(10 * time.Second)
		for n := runtime.NumGoroutine(); time.Now().Before(deadline); n = runtime.NumGoroutine() {
			time.Sleep(50 * time.Millisecond)
			if runtime.NumGoroutine() == n {
				return
			}
		}
	}
	settle()
	g0, h0 := runtime.NumGoroutine(), heap()
	// 1,000 clients, 10 at a time (a client's first RPC waits out an RNR
	// or two: sequential cycles would take 15 s).
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1000; i += 10 {
				cycle(i)
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Logf("%d of 1,000 clients failed to connect or PUT", n)
	}
	for deadline := time.Now().Add(20 * time.Second); runtime.NumGoroutine() > g0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after 1,000 clients left, %d before", runtime.NumGoroutine(), g0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if h := heap(); h > h0+16<<20 {
		t.Errorf("heap %d MiB after 1,000 clients left, %d MiB before", h>>20, h0>>20)
	}
}

// TestKVServeStalledHandshake: a dialer that never sends its RTU does not
// keep another client from being served while it stalls.
func TestKVServeStalledHandshake(t *testing.T) {
	fabric := fmt.Sprintf("loop://kvserve-%d/", kvFabrics.Add(1))
	addr := startKVServe(t, "--store", "prism-kv", "--device", fabric+"node")
	p, err := stallproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dev, err := verbs.Open(fabric + "stalled")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(16)
	if _, err := cm.Dial(ctx, dev, p.Addr(), cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq,
		PrivateData: memnode.Hello{Service: "prism-kv"}.Marshal()}); err != nil {
		t.Fatal(err)
	}
	if p.Pending() != 1 {
		t.Fatalf("%d stalled exchanges, want 1", p.Pending())
	}

	k, err := dialKV(ctx, "prism-kv", fabric+"client", addr, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.stores[0].Put(ctx, []byte("hello"), []byte("world")); err != nil {
		t.Fatal(err)
	}
	if n := p.Pending(); n != 1 {
		t.Errorf("the second client was served only after the stalled exchange ended (%d stalled now)", n)
	}
}

// TestKVServeToken: a client without the node's token or with a wrong
// one is refused; the token may come from --token, --token-file or
// $RDMAKIT_TOKEN, on both sides.
func TestKVServeToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startKVServe(t, "--store", "race", "--device", "tcp://127.0.0.1:0", "--token-file", file)
	kv := func(env string, args ...string) (string, int) {
		t.Setenv(tokenEnv, env)
		out, errs, code := execute(t, append([]string{"kv"}, append(args, "--node", addr, "--timeout", "5s")...)...)
		return out + errs, code
	}
	for _, args := range [][]string{{"get", "x"}, {"get", "x", "--token", "wrong"}, {"get", "x", "--store", "smart-ht"}} {
		if out, code := kv("", append(args, "--store", "race")...); code == 0 || !strings.Contains(out, "bad token") {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
	if out, code := kv("", "put", "a", "1", "--store", "race", "--token", "s3cret"); code != 0 {
		t.Errorf("--token: exit %d: %s", code, out)
	}
	if out, code := kv("", "get", "a", "--store", "smart-ht", "--token-file", file); code != 0 || out != "1\n" {
		t.Errorf("--token-file: exit %d: %s", code, out)
	}
	if out, code := kv("s3cret", "get", "a", "--store", "race"); code != 0 || out != "1\n" {
		t.Errorf("$%s: exit %d: %s", tokenEnv, code, out)
	}
	if out, code := kv("", "get", "a", "--store", "race", "--token", "s3cret", "--token-file", file); code == 0 || !strings.Contains(out, "give one") {
		t.Errorf("both: exit %d: %s", code, out)
	}
}

// TestKVUnknownStore: a store design that does not exist is reported as
// such, with the valid ones, not as an unreachable node.
func TestKVUnknownStore(t *testing.T) {
	for _, cmd := range [][]string{{"kv", "put", "k", "v"}, {"kv", "get", "k"}, {"kv", "bench"}, {"kv", "serve", "--listen", "127.0.0.1:0"}} {
		_, errs, code := execute(t, append(cmd, "--store", "nonsense")...)
		if code == 0 || !strings.Contains(errs, `no store design "nonsense"`) || !strings.Contains(errs, "pilaf prism-kv race smart-ht") ||
			strings.Contains(errs, "unreachable") {
			t.Errorf("%v: exit %d: %s", cmd, code, errs)
		}
	}
}

// TestNodeRejectsImpossibleRecv: more receives per connection than the
// device allows fail at start, naming the flag, instead of a node that
// refuses every client.
func TestNodeRejectsImpossibleRecv(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errs lockedBuffer
	code := run(ctx, []string{"node", "--uri", "tcp://127.0.0.1:0", "--cm", "127.0.0.1:0", "--metrics", "", "--mem", "64KiB", "--recv", "100000"}, &out, &errs)
	if ctx.Err() != nil || code == 0 || !strings.Contains(errs.String(), "--recv 100000") {
		t.Errorf("exit %d, stderr %q (stopped by the test: %v)", code, errs.String(), ctx.Err() != nil)
	}
}

// TestNodeTokenSources: the node takes its token from a file or the
// environment as well as from --token; a client without it is refused.
func TestNodeTokenSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	perf := func(args ...string) (string, int) {
		out, errs, code := execute(t, append([]string{"perf", "--op", "read", "--test", "lat", "--iters", "5", "--size", "8"}, args...)...)
		return out + errs, code
	}
	for _, tc := range []struct {
		env, want string
		args      []string
	}{{"", "fromfile", []string{"--token-file", file}}, {"fromenv", "fromenv", nil}} {
		t.Setenv(tokenEnv, tc.env)
		n := startNode(t, tc.args...)
		t.Setenv(tokenEnv, "")
		if !n.info.Token {
			t.Fatalf("%v: the node requires no token", tc.args)
		}
		if out, code := perf("--connect", n.info.CM); code == 0 || !strings.Contains(out, "bad token") {
			t.Errorf("%v: a client without the token: exit %d: %s", tc.args, code, out)
		}
		t.Setenv(tokenEnv, tc.want)
		if out, code := perf("--connect", n.info.CM); code != 0 {
			t.Errorf("%v: a client with $%s: exit %d: %s", tc.args, tokenEnv, code, out)
		}
		n.stop(t)
	}
}

// TestNodeStopsDespiteStalledHandshake: the node's shutdown (SIGINT and
// SIGTERM cancel the command's context) takes at most a second even
// with a dialer that never completes its handshake and a connected
// client.
func TestNodeStopsDespiteStalledHandshake(t *testing.T) {
	n := startNode(t, "--probe", "0")
	p, err := stallproxy.Start(n.info.CM)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dialNode(t, p.Addr(), nil) // its RTU never arrives
	c := dialNode(t, n.info.CM, nil)
	c.do(t, verbs.OpWrite, 0, 8)
	if p.Pending() != 1 {
		t.Fatalf("%d stalled exchanges, want 1", p.Pending())
	}
	t0 := time.Now()
	if code := n.stop(t); code != 0 {
		t.Fatalf("exit %d: %s", code, n.stderr.String())
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("the node took %v to stop", d)
	}
}

// TestKVServeMetrics: kv serve has /metrics like rdmakit node: the node's
// client counters and the store's keys and free slots.
func TestKVServeMetrics(t *testing.T) {
	for _, store := range []string{"prism-kv", "pilaf"} {
		t.Run(store, func(t *testing.T) {
			fabric := fmt.Sprintf("loop://kvserve-%d/", kvFabrics.Add(1))
			addr, url := startKVServeMetrics(t, true, "--store", store, "--device", fabric+"node")
			ctx := context.Background()
			k, err := dialKV(ctx, store, fabric+"c", addr, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			s := k.stores[0]
			for _, key := range []string{"a", "b", "c"} {
				if err := s.Put(ctx, []byte(key), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete(ctx, []byte("b")); err != nil {
				t.Fatal(err)
			}
			m := scrape(t, url)
			l := `{store="` + store + `"}`
			slots := m["rdmakit_kv_slots"+l]
			if m["rdmakit_kv_keys"+l] != 2 || slots < 1<<14 || m["rdmakit_kv_slots_free"+l] != slots-2 ||
				m["rdmakit_node_accepted_total"] != 1 || m["rdmakit_kv_memory_bytes"+l] == 0 {
				t.Errorf("metrics: keys %v slots %v free %v accepted %v memory %v", m["rdmakit_kv_keys"+l], slots,
					m["rdmakit_kv_slots_free"+l], m["rdmakit_node_accepted_total"], m["rdmakit_kv_memory_bytes"+l])
			}
		})
	}
}

// TestKVServeProcs: --procs sets the node's GOMAXPROCS while it serves
// (and restores it after, for a node run in-process); a negative value is
// refused.
func TestKVServeProcs(t *testing.T) {
	if _, errs, code := execute(t, "kv", "serve", "--listen", "127.0.0.1:0", "--procs", "-1"); code == 0 || !strings.Contains(errs, "--procs -1") {
		t.Errorf("--procs -1: exit %d: %s", code, errs)
	}
	before := runtime.GOMAXPROCS(0)
	t.Run("serve", func(t *testing.T) {
		addr := startKVServe(t, "--store", "prism-kv", "--device", "tcp://127.0.0.1:0?spin=0s", "--procs", "1")
		if n := runtime.GOMAXPROCS(0); n != 1 {
			t.Errorf("GOMAXPROCS %d while serving, want 1", n)
		}
		for _, args := range [][]string{{"put", "a", "1"}, {"get", "a"}} {
			out, errs, code := execute(t, append([]string{"kv"}, append(args, "--node", addr, "--timeout", "5s")...)...)
			if code != 0 || (args[0] == "get" && out != "1\n") {
				t.Errorf("%v: exit %d: %s%s", args, code, out, errs)
			}
		}
	})
	if n := runtime.GOMAXPROCS(0); n != before {
		t.Errorf("GOMAXPROCS %d after the node stopped, want %d", n, before)
	}
}
