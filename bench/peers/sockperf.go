package peers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SockperfMinMsgSize is the smallest message sockperf 3.x sends: its
// 14-byte header (sequence number and flags). Smaller sizes are refused.
const SockperfMinMsgSize = 14

// SockperfMaxMsgSize is the largest message sockperf sends (its
// MAX_PAYLOAD_SIZE, a UDP datagram's); larger sizes end the run with no
// statistics.
const SockperfMaxMsgSize = 65506

// SockperfOptions configure a sockperf TCP ping-pong run.
type SockperfOptions struct {
	// Duration is the client's run time (-t), rounded up to whole
	// seconds; 0 means 1 s. sockperf spends the first 400 ms warming up
	// and times only the rest.
	Duration time.Duration
	// MsgSize is the message size in bytes (-m); 0 means
	// SockperfMinMsgSize, which is also the minimum.
	MsgSize int
	// BusyPoll opens non-blocking sockets on both sides (--nonblocked),
	// so client and server spin in recvfrom instead of sleeping until a
	// message arrives: each keeps a core busy, and the round trip no
	// longer includes waking a sleeping thread (on this VM, blocking
	// round trips are bimodal, ~14 or ~70 µs, by whether the CPUs idle).
	BusyPoll bool
	// Timeout bounds the whole run; 0 means Duration + 10 s (sockperf
	// sleeps 2 s after its warm-up, before timing).
	Timeout time.Duration
}

// SockperfResult is a sockperf TCP ping-pong measurement over loopback.
// Every duration is a full round trip (client send → server echo →
// client receive): sockperf ran with --full-rtt.
type SockperfResult struct {
	// Command and ServerCommand are the client and server command
	// lines that were run.
	Command, ServerCommand string
	// BusyPoll is true when both sides spun on non-blocking sockets.
	BusyPoll bool
	// MsgSize is the message size in bytes, each way.
	MsgSize int
	// Samples is the number of timed round trips.
	Samples int
	// RTTAvg and RTTStdev are the mean and standard deviation.
	RTTAvg, RTTStdev time.Duration
	// RTTMin and RTTMax are the fastest and slowest round trips.
	RTTMin, RTTMax time.Duration
	// RTTP50, RTTP90, RTTP99 and RTTP999 are percentiles.
	RTTP50, RTTP90, RTTP99, RTTP999 time.Duration
	// Report is the parsed output.
	Report *SockperfReport
}

// Sockperf measures TCP ping-pong round trips with sockperf over
// 127.0.0.1: it starts `sockperf server --tcp -i 127.0.0.1 -p PORT` on a
// free port, waits until it listens, runs `sockperf ping-pong --tcp -i
// 127.0.0.1 -p PORT -m SIZE -t SECONDS --full-rtt` (both with
// --nonblocked when BusyPoll), parses the client's report and kills the
// server. A run takes Duration + about 2.5 s. It returns an error wrapping
// ErrNotInstalled when sockperf is not on PATH.
func Sockperf(ctx context.Context, opts SockperfOptions) (*SockperfResult, error) {
	bin, err := lookPath("sockperf", "sockperf")
	if err != nil {
		return nil, err
	}
	if opts.MsgSize == 0 {
		opts.MsgSize = SockperfMinMsgSize
	}
	if opts.MsgSize < SockperfMinMsgSize {
		return nil, fmt.Errorf("sockperf: message size %d below its minimum of %d bytes", opts.MsgSize, SockperfMinMsgSize)
	}
	secs := max(int((opts.Duration+time.Second-1)/time.Second), 1)
	if opts.Timeout == 0 {
		opts.Timeout = time.Duration(secs)*time.Second + 10*time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	var extra []string
	if opts.BusyPoll {
		extra = []string{"--nonblocked"}
	}
	env := childEnv(nil)
	serverArgs := func(port int) []string {
		return append([]string{"server", "--tcp", "-i", "127.0.0.1", "-p", strconv.Itoa(port)}, extra...)
	}
	srv, port, err := startServer(ctx, bin, serverArgs, env)
	if err != nil {
		return nil, fmt.Errorf("sockperf server: %w", err)
	}
	defer srv.stop()

	args := []string{"ping-pong", "--tcp", "-i", "127.0.0.1", "-p", strconv.Itoa(port),
		"-m", strconv.Itoa(opts.MsgSize), "-t", strconv.Itoa(secs), "--full-rtt"}
	args = append(args, extra...)
	out, runErr := runClient(ctx, bin, args, env)
	rep, err := ParseSockperf(out)
	if err != nil {
		if runErr != nil {
			return nil, fmt.Errorf("sockperf ping-pong: %w: %v", runErr, err)
		}
		return nil, err
	}
	if runErr != nil {
		return nil, fmt.Errorf("sockperf ping-pong: %w: %s", runErr, tail(out, 3))
	}
	r := sockperfResult(rep, "sockperf "+strings.Join(args, " "), opts.MsgSize)
	r.ServerCommand = "sockperf " + strings.Join(serverArgs(port), " ")
	r.BusyPoll = opts.BusyPoll
	return r, nil
}

// sockperfResult turns a report into round-trip figures, doubling the
// one-way latencies sockperf prints without --full-rtt.
func sockperfResult(rep *SockperfReport, command string, size int) *SockperfResult {
	f := time.Duration(1)
	if !rep.FullRTT {
		f = 2
	}
	pct := func(rank float64) time.Duration {
		d, _ := rep.Percentile(rank)
		return d * f
	}
	return &SockperfResult{
		Command: command, MsgSize: size, Samples: rep.Observations,
		RTTAvg: rep.Avg * f, RTTStdev: rep.Stdev * f, RTTMin: rep.Min * f, RTTMax: rep.Max * f,
		RTTP50: pct(50), RTTP90: pct(90), RTTP99: pct(99), RTTP999: pct(99.9),
		Report: rep,
	}
}
