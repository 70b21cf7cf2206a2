package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench/perf"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// perfFlags are the flags of rdmakit perf.
type perfFlags struct {
	uri      string
	op       string
	test     string
	size     int
	sizes    string
	iters    int
	duration time.Duration
	window   int
	batch    int
	poll     string
	connect  string
	token    tokenFlags
}

func newPerfCmd() *cobra.Command {
	var f perfFlags
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Measure latency and bandwidth of verbs operations, like the perftest tools",
		Long: `perf measures a client/server device pair the way ib_read_lat, ib_write_bw
and friends measure RDMA NICs. Both ends are opened in this process, unless
--connect names the cm address of a server in another process or on another
host (rdmakit node): then perf opens only the client device (--uri, default
tcp://127.0.0.1:0), connects, and targets the first memory region the node
describes. In that mode --op all means read, write, cas and faa; send must be
asked for and needs a node started with --echo (SEND latency is half an
echoed round trip), messages no larger than the node's --recv-size and a
--window no larger than its --recv.

Latency (--test lat) posts one operation at a time and times it from post to
polled completion; SEND latency is half the round trip of an echoed message.
Bandwidth (--test bw) keeps --window operations outstanding, posted in lists of
--batch with only the last signaled.`,
		Example: `  rdmakit perf --op read --test lat --size 8
  rdmakit perf --op write --test bw --sizes 8-1048576 --poll busy
  rdmakit perf --uri loop://lab --op all --duration 200ms
  rdmakit perf --connect 127.0.0.1:7472 --op read --test both --size 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPerf(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.uri, "uri", "", "devices: CLIENT,SERVER URIs or a base such as loop://FABRIC (nodes /client and /server); default a fresh loop fabric. With --connect: the client device, default tcp://127.0.0.1:0")
	fl.StringVar(&f.connect, "connect", "", "measure against the server (rdmakit node) whose cm side channel listens at HOST:PORT")
	f.token.add(fl, "with --connect: the node's auth token (device token= and cm private data)")
	fl.StringVar(&f.op, "op", "all", "operation: read, write, send, cas, faa, a comma-separated list or all")
	fl.StringVar(&f.test, "test", "both", "test: lat, bw or both")
	fl.IntVar(&f.size, "size", 0, "a single message size in bytes (overrides --sizes)")
	fl.StringVar(&f.sizes, "sizes", "8-1048576", "message sizes: a power-of-two range LO-HI or a comma-separated list")
	fl.IntVar(&f.iters, "iters", 0, "operations per size (default 1000 for lat, 5000 for bw, like perftest)")
	fl.DurationVar(&f.duration, "duration", 0, "measure each size for this long instead of --iters")
	fl.IntVar(&f.window, "window", 128, "operations outstanding in the bandwidth test (tx depth)")
	fl.IntVar(&f.batch, "batch", 0, "operations per post list in the bandwidth test, the last signaled (default window/8)")
	fl.StringVar(&f.poll, "poll", "adaptive", "polling policy: adaptive, busy or event")
	return cmd
}

var perfFabricSeq atomic.Int64

// perfURIs resolves --uri into the client and server device URIs.
func perfURIs(uri string) (client, server string, err error) {
	if uri == "" {
		base := fmt.Sprintf("loop://perf-%d", perfFabricSeq.Add(1))
		return base + "/client", base + "/server", nil
	}
	if c, s, ok := strings.Cut(uri, ","); ok {
		if c == "" || s == "" {
			return "", "", fmt.Errorf("--uri %q: want CLIENT,SERVER", uri)
		}
		return c, s, nil
	}
	base := strings.TrimRight(uri, "/")
	return base + "/client", base + "/server", nil
}

func runPerf(cmd *cobra.Command, f *perfFlags) error {
	ops, err := perf.ParseOps(f.op)
	if err != nil {
		return err
	}
	tests, err := perf.ParseTests(f.test)
	if err != nil {
		return err
	}
	sizes := []int{f.size}
	if f.size <= 0 {
		if sizes, err = perf.ParseSizes(f.sizes); err != nil {
			return err
		}
	}
	poll, err := pollFlag(f.poll)
	if err != nil {
		return err
	}
	if f.window <= 0 || f.batch < 0 || f.iters < 0 || f.duration < 0 {
		return errors.New("--window must be positive; --batch, --iters and --duration must not be negative")
	}
	cfg := perf.Config{Poll: poll, Window: f.window, Batch: f.batch, MaxSize: max(perf.MaxSize, maxOf(sizes))}
	pair, err := openPerfPair(cmd.Context(), f, cfg)
	if err != nil {
		return err
	}
	defer pair.Close()
	cfg = pair.Config()
	var extra []string
	if f.connect != "" {
		cfg.Client = pair.ClientAddress() // the URI may carry the token
		extra = append(extra, fmt.Sprintf(" Remote region  : %v (cm %s)", pair.Remote(), f.connect))
	}
	if f.connect != "" && f.op == "all" {
		ops = []perf.Op{perf.Read, perf.Write, perf.CAS, perf.FAA}
		slog.Info("--connect: --op all is read, write, cas and faa; ask for send explicitly (the node needs --echo)")
	}

	w := cmd.OutOrStdout()
	for _, op := range ops {
		for _, test := range tests {
			stop := perf.Stop{Iters: f.iters, Duration: f.duration}
			if f.duration > 0 {
				stop.Iters = 0
			} else if f.iters == 0 {
				stop.Iters = map[perf.Test]int{perf.Lat: 1000, perf.BW: 5000}[test]
			}
			pl := &perf.Plan{Ops: []perf.Op{op}, Tests: []perf.Test{test}, Sizes: sizes, Stop: stop}
			if op.Atomic() && !containsSize(sizes, 8) {
				slog.Info("atomics are measured at 8 bytes only", "op", op)
			}
			printPerftestHeader(w, op, test, &cfg, pair.Transport(), extra...)
			printPerftestColumns(w, test)
			if _, err := pair.Run(cmd.Context(), pl, func(m perf.Measurement) { printPerftestRow(w, &m) }); err != nil {
				return remoteHint(f, op, err)
			}
			fmt.Fprintln(w, perftestRule)
			fmt.Fprintln(w)
		}
	}
	return nil
}

// openPerfPair opens both devices, or with --connect the client device,
// connected to the remote server.
func openPerfPair(ctx context.Context, f *perfFlags, cfg perf.Config) (*perf.Pair, error) {
	if f.connect == "" {
		if f.token.token != "" || f.token.file != "" {
			return nil, errors.New("--token and --token-file need --connect")
		}
		client, server, err := perfURIs(f.uri)
		if err != nil {
			return nil, err
		}
		cfg.Client, cfg.Server = client, server
		slog.Debug("opening devices", "client", client, "server", server)
		return perf.Open(cfg)
	}
	uri := f.uri
	if uri == "" {
		uri = "tcp://127.0.0.1:0"
	}
	if strings.Contains(uri, ",") {
		return nil, fmt.Errorf("--uri %q: with --connect, give only the client device", uri)
	}
	token, err := f.token.value()
	if err != nil {
		return nil, err
	}
	if cfg.Client, err = withQuery(uri, "token", token); err != nil {
		return nil, err
	}
	private := memnode.Hello{Token: token}.Marshal()
	slog.Debug("connecting", "client", cfg.Client, "cm", f.connect)
	return perf.Dial(ctx, cfg, f.connect, private)
}

// remoteHint explains the usual causes of a failed SEND against a node.
func remoteHint(f *perfFlags, op perf.Op, err error) error {
	switch {
	case f.connect == "" || op != perf.Send:
		return err
	case errors.Is(err, perf.ErrNoEcho):
		return fmt.Errorf("%w (start the node with --echo)", err)
	case errors.Is(err, verbs.StatusRemInvReqErr.Err()):
		return fmt.Errorf("%w (is the message larger than the node's --recv-size?)", err)
	}
	return err
}

func maxOf(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

func containsSize(s []int, n int) bool {
	for _, v := range s {
		if v == n {
			return true
		}
	}
	return false
}
