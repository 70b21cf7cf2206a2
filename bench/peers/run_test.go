package peers

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// need skips the test, with the install hint, when bin is not on PATH.
func need(t *testing.T, bin, peer string) {
	t.Helper()
	if _, err := lookPath(bin, peer); err != nil {
		t.Skip(err)
	}
}

func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := t.Context()
	if _, err := Sockperf(ctx, SockperfOptions{}); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install-peers.sh sockperf") {
		t.Errorf("Sockperf: %v, want ErrNotInstalled with a hint", err)
	}
	if _, err := UCXPerftest(ctx, UCXOptions{}); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "install-peers.sh ucx") {
		t.Errorf("UCXPerftest: %v, want ErrNotInstalled with a hint", err)
	}
}

func TestSockperfRun(t *testing.T) {
	need(t, "sockperf", "sockperf")
	if testing.Short() {
		t.Skip("sockperf sleeps 2 s before every test: a run takes over 3 s")
	}
	start := time.Now()
	r, err := Sockperf(t.Context(), SockperfOptions{Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d samples, RTT p50 %v p99 %v avg %v (%v)", r.Command, r.Samples, r.RTTP50, r.RTTP99, r.RTTAvg, time.Since(start).Round(time.Millisecond))
	if r.Samples == 0 || r.RTTP50 <= 0 || r.RTTP99 < r.RTTP50 || !r.Report.FullRTT || r.MsgSize != SockperfMinMsgSize {
		t.Errorf("implausible result %+v", *r)
	}
	assertNoChild(t, "sockperf")
}

func TestSockperfBusyPoll(t *testing.T) {
	need(t, "sockperf", "sockperf")
	if testing.Short() {
		t.Skip("sockperf sleeps 2 s before every test: a run takes over 3 s")
	}
	r, err := Sockperf(t.Context(), SockperfOptions{BusyPoll: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (server: %s): RTT p50 %v p99 %v", r.Command, r.ServerCommand, r.RTTP50, r.RTTP99)
	if !r.BusyPoll || !strings.Contains(r.Command, "--nonblocked") || !strings.Contains(r.ServerCommand, "--nonblocked") || r.Samples == 0 {
		t.Errorf("result %+v", *r)
	}
	assertNoChild(t, "sockperf")
}

func TestSockperfSmallMessage(t *testing.T) {
	need(t, "sockperf", "sockperf")
	if _, err := Sockperf(t.Context(), SockperfOptions{MsgSize: 8}); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("8-byte message: %v, want an error about the minimum", err)
	}
}

func TestUCXPerftestRun(t *testing.T) {
	need(t, "ucx_perftest", "ucx")
	for _, o := range []UCXOptions{
		{Test: "ucp_am_lat", TLS: "tcp", Iters: 2000, Warmup: 200},
		// Few iterations: two busy-polling processes on a loaded 2-core
		// machine can lose a whole scheduler slice per round trip.
		{Test: "ucp_am_lat", TLS: "posix", Iters: 2000, Warmup: 200},
		{Test: "ucp_get", TLS: "posix", Iters: 2000, Warmup: 200},
		{Test: "ucp_cswap", TLS: "posix", Iters: 2000, Warmup: 200},
	} {
		start := time.Now()
		r, err := UCXPerftest(t.Context(), o)
		if err != nil {
			t.Errorf("%+v: %v", o, err)
			continue
		}
		t.Logf("%s: latency %v avg %v, RTT %v (%v)", r.Command, r.Latency, r.LatencyAvg, r.RTT, time.Since(start).Round(time.Millisecond))
		if r.Iterations != int64(o.Iters) || r.RTT <= 0 || r.Report.Metric != "latency" || r.PingPong != (o.Test == "ucp_am_lat") {
			t.Errorf("implausible result %+v", *r)
		}
	}
	assertNoChild(t, "ucx_perftest")
}

func TestUCXPerftestUnsupported(t *testing.T) {
	need(t, "ucx_perftest", "ucx")
	for _, c := range []struct {
		opts UCXOptions
		want string
	}{
		{UCXOptions{Test: "ucp_am_lat", TLS: "nosuchtl"}, "no usable transports"},
		{UCXOptions{Test: "ucp_cswap", TLS: "posix", Size: 3}, "Atomic size"},
		{UCXOptions{Test: "no_such_test", TLS: "posix"}, "Invalid option argument for -t"},
		{UCXOptions{Test: "ucp_am_lat", TLS: "cma"}, "Assertion"}, // cma has no active messages
	} {
		start := time.Now()
		_, err := UCXPerftest(t.Context(), c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.opts, err, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%+v: took %v", c.opts, d)
		}
	}
	assertNoChild(t, "ucx_perftest")
}

func TestUCXPerftestTimeout(t *testing.T) {
	need(t, "ucx_perftest", "ucx")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := UCXPerftest(ctx, UCXOptions{Test: "ucp_get", TLS: "tcp", Iters: 1000000})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want a deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v after a 300ms deadline", d)
	}
	assertNoChild(t, "ucx_perftest")
}

// assertNoChild fails if a child of this process named bin still runs.
func assertNoChild(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command("pgrep", "-P", itoa(pid()), "-x", bin).Output()
	if err != nil {
		return // pgrep exits 1 when nothing matches, or is missing
	}
	t.Errorf("%s children left running: %s", bin, strings.TrimSpace(string(out)))
}

func pid() int { return os.Getpid() }

func itoa(n int) string { return strconv.Itoa(n) }
