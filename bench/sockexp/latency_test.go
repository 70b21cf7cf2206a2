package sockexp

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench/stats"
)

// sock-latency, quick: a row per system and size with non-zero
// percentiles, the baselines' ratios to themselves 1, sockperf's row
// when it is installed, the sock systems' ratio notes, and no server
// left running.
func TestLatencyQuick(t *testing.T) {
	socks := sockNets()
	r, err := runLatency(t.Context(), quickEnv(), netNets(), socks)
	if err != nil {
		t.Fatal(err)
	}
	noChildren(t)
	sizes := map[string]int{}
	for _, row := range r.Rows {
		sys := col(t, r, row, "system").(string)
		sizes[sys]++
		positive(t, r, row, "p50", "p99", "mean")
		if n, ok := col(t, r, row, "samples").(int); !ok || n <= 0 {
			t.Errorf("%v: samples %v", row[:3], col(t, r, row, "samples"))
		}
		if p50, p99 := col(t, r, row, "p50").(float64), col(t, r, row, "p99").(float64); p99 < p50 {
			t.Errorf("%v: p99 %v below p50 %v", row[:3], p99, p50)
		}
		switch sys {
		case tcpLabel:
			if col(t, r, row, "vs_tcp") != 1.0 {
				t.Errorf("%v: net/tcp against itself %v", row[:3], col(t, r, row, "vs_tcp"))
			}
		case unixLabel:
			if col(t, r, row, "vs_uds") != 1.0 {
				t.Errorf("%v: net/unix against itself %v", row[:3], col(t, r, row, "vs_uds"))
			}
		}
		if col(t, r, row, "vs_tcp") == nil || col(t, r, row, "vs_uds") == nil {
			t.Errorf("%v: no ratio", row[:3])
		}
	}
	want := map[string]int{tcpLabel: len(latencySizes), unixLabel: len(latencySizes)}
	for _, n := range socks {
		want[n.label()] += len(latencySizes)
	}
	if _, err := exec.LookPath("sockperf"); err == nil {
		want[sockperfLabel] = 1
	}
	for sys, n := range want {
		if sizes[sys] != n {
			t.Errorf("%s: %d rows, want %d (%v)", sys, sizes[sys], n, sizes)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	if len(socks) == 0 || !strings.Contains(notes, "sock/shm and sock/tcp are rdmakit's sock package") {
		t.Errorf("no sock rows or no note on them: %s", notes)
	}
	for _, n := range socks {
		if !strings.Contains(notes, n.label()+" ("+n.mode+") at 64 B, same run: p50") {
			t.Errorf("no ratio note for %s: %s", n.label(), notes)
		}
	}
}

// An echo server answering other bytes than sent fails the point.
func TestLatencyWrongEcho(t *testing.T) {
	ln := listenTCP(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			buf[0] ^= 0xff
			c.Write(buf[:n])
		}
	}()
	n := netNets()[0]
	_, err := measureLatency(t.Context(), n, "net+tcp://"+ln.Addr().String(), 64, 20*time.Millisecond, stats.NewLatencies(16))
	if err != errEcho {
		t.Fatalf("measure: %v, want errEcho", err)
	}
}

// A round trip of the measuring loop allocates nothing.
func TestPingPongAllocs(t *testing.T) {
	ln := listenTCP(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Echo) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, in := make([]byte, 256), make([]byte, 256)
	lat := stats.NewLatencies(1024)
	var loopErr error
	allocs := testing.AllocsPerRun(200, func() {
		if err := pingPong(c, out, in, time.Time{}, lat); err != nil {
			loopErr = err
		}
	})
	if loopErr != nil {
		t.Fatal(loopErr)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per round trip", allocs)
	}
	if lat.Count() != 201 {
		t.Errorf("%d round trips recorded, want 201", lat.Count())
	}
}

// listenTCP listens on a free loopback port for the test's duration.
func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
