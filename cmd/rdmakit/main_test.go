package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// execute runs the command line and returns its stdout and stderr.
func execute(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestDemo(t *testing.T) {
	out, errs, code := execute(t, "demo", "--keys", "2000", "--duration", "50ms", "--out", "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "| store | workload | rate [ops/s] | p50 [µs] | p99 [µs] | round_trips | node_cpu [µs/op] |",
		"| pilaf | A zipfian |", "| prism-kv | C uniform |", "| race | A zipfian |", "| smart-ht | C uniform |",
		"What the columns mean")
}

func TestDemoVerbs(t *testing.T) {
	out, errs, code := execute(t, "demo", "verbs", "--duration", "5ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "OP", "LAT p50", "LAT p99", "RATE 8 B", "BW 4 KiB", "BW 64 KiB",
		"RDMA_READ", "RDMA_WRITE", "SEND", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", " µs", " Mops", " GB/s",
		"What the numbers mean")
}

func TestPerfReadLat(t *testing.T) {
	out, errs, code := execute(t, "perf", "--op", "read", "--test", "lat", "--size", "8", "--iters", "200", "--poll", "busy")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "RDMA_Read Latency Test", " Transport      : loop", " Poll policy    : busy", " GOMAXPROCS     : ",
		"#bytes", "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]",
		"99% percentile[usec]")
	lines := strings.Split(out, "\n")
	row := ""
	for i, l := range lines {
		if strings.Contains(l, "t_min[usec]") && i+1 < len(lines) {
			row = lines[i+1]
		}
	}
	if f := strings.Fields(row); len(f) != 9 || f[0] != "8" || f[1] != "200" {
		t.Errorf("row = %q", row)
	}
	if strings.Contains(out, "BW average") {
		t.Error("lat run printed a bandwidth table")
	}
}

func TestPerfBWAndSend(t *testing.T) {
	out, errs, code := execute(t, "perf", "--uri", "loop://cmdtest", "--op", "write,send,faa", "--test", "bw", "--sizes", "8-64", "--duration", "5ms", "--window", "16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "RDMA_Write BW Test", "Send BW Test", "Atomic FETCH_AND_ADD BW Test",
		"BW peak[MB/sec]", "BW average[MB/sec]", "MsgRate[Mpps]", "loop://cmdtest/client -> loop://cmdtest/server",
		"TX depth       : 16 (post lists of 2, last signaled)")
	if n := strings.Count(out, "\n 64 "); n != 2 {
		t.Errorf("%d rows of 64 bytes, want 2 (write, send):\n%s", n, out)
	}
}

func TestBenchListAndRun(t *testing.T) {
	out, errs, code := execute(t, "bench", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "NAME", "DESCRIPTION", "perf ")

	dir := filepath.Join(t.TempDir(), "res")
	out, errs, code = execute(t, "bench", "run", "perf", "--quick", "--duration", "3ms", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	mustContain(t, out, "# Verbs latency", "| op | test | bytes [B] | iterations | p50 [µs] |", "| read | lat | 8 |",
		"| faa | bw | 8 |", "- **polling:** adaptive", "- **transport:** loop")
	for _, ext := range []string{".json", ".md", ".png"} {
		p := filepath.Join(dir, "perf"+ext)
		mustContain(t, out, "wrote "+p)
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, code := execute(t, "version")
	if code != 0 {
		t.Fatal(code)
	}
	mustContain(t, out, "rdmakit ", "go          go", "transports  loop")
}

func TestErrors(t *testing.T) {
	for _, args := range [][]string{
		{"perf", "--op", "nope"},
		{"perf", "--test", "x"},
		{"perf", "--poll", "x"},
		{"perf", "--sizes", "64-8"},
		{"perf", "--uri", "nosuch://x", "--size", "8", "--iters", "1"},
		{"bench", "run", "no-such-experiment"},
		{"bench", "run"},
		{"nonsense"},
		{"demo", "--duration", "0s"},
		{"demo", "verbs", "--duration", "0s"},
		{"node", "--mem", "lots"},
		{"node", "--mem", "100", "--mrs", "3"},
		{"node", "--access", "exec"},
		{"node", "--recv", "0"},
		{"node", "--uri", "tcp://127.0.0.1:0", "--cm", "127.0.0.1:0", "--metrics", "not-an-address"},
		{"perf", "--token", "x", "--size", "8", "--iters", "1"},
		{"perf", "--connect", "127.0.0.1:1", "--size", "8", "--iters", "1"},
	} {
		out, errs, code := execute(t, args...)
		if code == 0 || !strings.HasPrefix(errs, "rdmakit: ") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, errs, out)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4KiB": 4 << 10, "64MiB": 64 << 20, "1GiB": 1 << 30, "2G": 2 << 30, "8 B": 8, "1 TiB": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "x", "4XB", "1.5GiB", "99999999999TiB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
	if s := formatBytes(16 << 20); s != "16 MiB" {
		t.Errorf("formatBytes = %q", s)
	}
}

func TestKVCommands(t *testing.T) {
	freeAddr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	for _, store := range []string{"prism-kv", "pilaf", "race"} {
		t.Run(store, func(t *testing.T) {
			addr := freeAddr()
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan int, 1)
			var sout, serr bytes.Buffer
			go func() {
				served <- run(ctx, []string{"kv", "serve", "--store", store, "--listen", addr, "--metrics", "", "--keys", "10000"}, &sout, &serr)
			}()
			defer func() {
				cancel()
				if code := <-served; code != 0 {
					t.Errorf("serve exited %d: %s", code, serr.String())
				}
			}()
			kv := func(args ...string) (string, int) {
				var out, errs bytes.Buffer
				for i := 0; i < 50; i++ { // the node may still be starting
					out.Reset()
					errs.Reset()
					code := run(context.Background(), append(append([]string{"kv"}, args...), "--node", addr, "--store", store), &out, &errs)
					if code == 0 || !strings.Contains(errs.String(), "unreachable") {
						return out.String() + errs.String(), code
					}
					time.Sleep(20 * time.Millisecond)
				}
				return out.String() + errs.String(), -1
			}
			if out, code := kv("put", "hello", "world"); code != 0 {
				t.Fatalf("put: %d %s", code, out)
			}
			if out, code := kv("get", "hello"); code != 0 || out != "world\n" {
				t.Fatalf("get: %d %q", code, out)
			}
			if out, code := kv("del", "hello"); code != 0 {
				t.Fatalf("del: %d %s", code, out)
			}
			if out, code := kv("get", "hello"); code != 1 || !strings.Contains(out, "not found") {
				t.Fatalf("get after del: %d %q", code, out)
			}
			out, code := kv("bench", "--workload", "a", "--records", "500", "--duration", "100ms", "--load", "--conns", "2", "--tasks", "4")
			if code != 0 {
				t.Fatalf("bench: %d %s", code, out)
			}
			mustContain(t, out, "loaded 500 records", "ops/s", "p50", "round trips", "errors       0")
		})
	}
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"kv", "get", "x", "--node", freeAddr(), "--timeout", "500ms"}, &out, &errs); code == 0 {
		t.Errorf("get from no node succeeded: %s", out.String())
	}
}
