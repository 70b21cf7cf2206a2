package peers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UCX test defaults.
const (
	// UCXDefaultIters is the default number of timed iterations.
	UCXDefaultIters = 10000
	// UCXDefaultWarmup is the default number of warm-up iterations
	// (ucx_perftest's own default, 10000, is slow over tcp).
	UCXDefaultWarmup = 1000
	// ucxServerExit bounds the wait for the server to end by itself once
	// the client is done, before it is killed.
	ucxServerExit = 2 * time.Second
)

// ucxPingPong are the ucx_perftest tests of type ping-pong, whose printed
// latency is half the round trip. The others stream operations one way.
var ucxPingPong = map[string]bool{
	"am_lat": true, "put_lat": true, "add_lat": true, "tag_lat": true,
	"tag_sync_lat": true, "ucp_put_lat": true, "stream_lat": true, "ucp_am_lat": true,
}

// UCXPingPong reports whether ucx_perftest's test is a ping-pong test,
// for which it prints half the round trip as the latency.
func UCXPingPong(test string) bool { return ucxPingPong[test] }

// UCXOptions configure a ucx_perftest run.
type UCXOptions struct {
	// Test is the ucx_perftest test (-t), e.g. "ucp_am_lat", "ucp_put_lat",
	// "ucp_get", "ucp_cswap", "ucp_fadd", "tag_lat"; empty means
	// "ucp_am_lat".
	Test string
	// TLS is the UCX_TLS transport list, e.g. "tcp" or "posix"; empty
	// means "tcp". UCX_NET_DEVICES is set to lo, so tcp stays on loopback.
	TLS string
	// Size is the message size in bytes (-s); 0 means 8. Atomics take
	// 4 or 8.
	Size int
	// Iters is the number of timed iterations (-n); 0 means
	// UCXDefaultIters.
	Iters int
	// Warmup is the number of warm-up iterations (-w); 0 means
	// UCXDefaultWarmup, negative means none.
	Warmup int
	// Env holds extra NAME=VALUE settings for both processes, e.g.
	// "UCX_POSIX_USE_PROC_LINK=n". Inherited UCX_* variables are dropped.
	Env []string
	// Timeout bounds the whole run; 0 means 30 s.
	Timeout time.Duration
}

// UCXResult is a ucx_perftest measurement between two processes on this
// machine.
type UCXResult struct {
	// Command and ServerCommand are the client and server command lines
	// that were run, with their environment settings.
	Command, ServerCommand string
	// Test, TLS and Size are the test, UCX_TLS and message size.
	Test, TLS string
	Size      int
	// PingPong is true for ping-pong tests (*_lat): Latency is then
	// half the round trip.
	PingPong bool
	// Latency and LatencyAvg are the figures ucx_perftest printed: the
	// typical (median) and mean latency, in its own sense (see PingPong;
	// for bandwidth tests it is the overhead per posted operation).
	Latency, LatencyAvg time.Duration
	// RTT and RTTAvg are the typical and mean round trip as the initiator
	// sees it: twice Latency for ping-pong tests; Latency itself for
	// one-at-a-time gets and fetching atomics, whose operation already
	// spans request and reply. Zero for bandwidth (overhead) tests.
	RTT, RTTAvg time.Duration
	// BandwidthMiBps is the payload bandwidth in MiB/s, MsgRate the
	// messages per second.
	BandwidthMiBps, MsgRate float64
	// Iterations is the number of timed iterations.
	Iterations int64
	// Report is the parsed output of the client.
	Report *UCXReport
}

// UCXPerftest runs one ucx_perftest test between two processes over
// 127.0.0.1: it starts the server `ucx_perftest -p PORT` on a free port
// with UCX_TLS and UCX_NET_DEVICES=lo, waits until it listens, runs the
// client `ucx_perftest 127.0.0.1 -p PORT -t TEST -s SIZE -n ITERS -w
// WARMUP` with the same environment, parses its summary and stops the
// server. A test the transport cannot run fails with UCX's error
// message rather than hanging. It returns an error wrapping
// ErrNotInstalled when ucx_perftest is not on PATH.
func UCXPerftest(ctx context.Context, opts UCXOptions) (*UCXResult, error) {
	bin, err := lookPath("ucx_perftest", "ucx")
	if err != nil {
		return nil, err
	}
	if opts.Test == "" {
		opts.Test = "ucp_am_lat"
	}
	if opts.TLS == "" {
		opts.TLS = "tcp"
	}
	if opts.Size == 0 {
		opts.Size = 8
	}
	if opts.Iters == 0 {
		opts.Iters = UCXDefaultIters
	}
	if opts.Warmup == 0 {
		opts.Warmup = UCXDefaultWarmup
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Size < 0 || opts.Iters < 0 || strings.ContainsAny(opts.Test+opts.TLS, " \t\n=") {
		return nil, fmt.Errorf("ucx_perftest: invalid options %+v", opts)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	set := append([]string{"UCX_TLS=" + opts.TLS, "UCX_NET_DEVICES=lo", "UCX_WARN_UNUSED_ENV_VARS=n"}, opts.Env...)
	env := childEnv([]string{"UCX_"}, set...)
	serverArgs := func(port int) []string { return []string{"-p", strconv.Itoa(port)} }
	srv, port, err := startServer(ctx, bin, serverArgs, env)
	if err != nil {
		return nil, fmt.Errorf("ucx_perftest server: %w", err)
	}
	defer srv.stop()

	args := []string{"127.0.0.1", "-p", strconv.Itoa(port), "-t", opts.Test,
		"-s", strconv.Itoa(opts.Size), "-n", strconv.Itoa(opts.Iters), "-w", strconv.Itoa(max(opts.Warmup, 0))}
	command := strings.Join(set, " ") + " ucx_perftest " + strings.Join(args, " ")
	out, runErr := runClient(ctx, bin, args, env)
	rep, err := ParseUCXPerftest(out)
	switch {
	case err != nil && runErr != nil:
		err = fmt.Errorf("%w: %v", runErr, err)
	case runErr != nil:
		err = fmt.Errorf("ucx_perftest: %w: %s", runErr, tail(out, 3))
	}
	if err != nil {
		// Both sides print UCX's complaint; the server's may be the only one.
		if srv.wait(100 * time.Millisecond) {
			if _, serr := ParseUCXPerftest(srv.out.Bytes()); serr != nil && !strings.Contains(err.Error(), serr.Error()) {
				err = fmt.Errorf("%w (server: %v)", err, serr)
			}
		}
		return nil, fmt.Errorf("%s %s over %s: %w", opts.Test, sizeString(opts.Size), opts.TLS, err)
	}
	srv.wait(ucxServerExit) // the server ends by itself after one test
	r := ucxResult(rep, opts, command)
	r.ServerCommand = strings.Join(set, " ") + " ucx_perftest " + strings.Join(serverArgs(port), " ")
	return r, nil
}

// ucxResult turns a report into a result with round-trip figures.
func ucxResult(rep *UCXReport, opts UCXOptions, command string) *UCXResult {
	r := &UCXResult{
		Command: command, Test: opts.Test, TLS: opts.TLS, Size: opts.Size,
		PingPong: UCXPingPong(opts.Test),
		Latency:  rep.Typical, LatencyAvg: rep.Avg,
		BandwidthMiBps: rep.BandwidthMiBps, MsgRate: rep.MsgRate,
		Iterations: rep.Iterations, Report: rep,
	}
	switch {
	case r.PingPong:
		r.RTT, r.RTTAvg = 2*rep.Typical, 2*rep.Avg
	case rep.Metric != "overhead":
		r.RTT, r.RTTAvg = rep.Typical, rep.Avg
	}
	return r
}

// sizeString formats a message size, e.g. "8 B".
func sizeString(n int) string { return strconv.Itoa(n) + " B" }
