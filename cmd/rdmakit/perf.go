package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench/perf"
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
}

func newPerfCmd() *cobra.Command {
	var f perfFlags
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Measure latency and bandwidth of verbs operations, like the perftest tools",
		Long: `perf measures a client/server device pair the way ib_read_lat, ib_write_bw
and friends measure RDMA NICs. Both ends are opened in this process.

Latency (--test lat) posts one operation at a time and times it from post to
polled completion; SEND latency is half the round trip of an echoed message.
Bandwidth (--test bw) keeps --window operations outstanding, posted in lists of
--batch with only the last signaled.`,
		Example: `  rdmakit perf --op read --test lat --size 8
  rdmakit perf --op write --test bw --sizes 8-1048576 --poll busy
  rdmakit perf --uri loop://lab --op all --duration 200ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPerf(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.uri, "uri", "", "devices: CLIENT,SERVER URIs or a base such as loop://FABRIC (nodes /client and /server); default a fresh loop fabric")
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
	client, server, err := perfURIs(f.uri)
	if err != nil {
		return err
	}
	cfg := perf.Config{Client: client, Server: server, Poll: poll, Window: f.window, Batch: f.batch,
		MaxSize: max(perf.MaxSize, maxOf(sizes))}
	slog.Debug("opening devices", "client", client, "server", server)
	pair, err := perf.Open(cfg)
	if err != nil {
		return err
	}
	defer pair.Close()
	cfg = pair.Config()

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
			printPerftestHeader(w, op, test, &cfg, pair.Transport())
			printPerftestColumns(w, test)
			if _, err := pair.Run(cmd.Context(), pl, func(m perf.Measurement) { printPerftestRow(w, &m) }); err != nil {
				return err
			}
			fmt.Fprintln(w, perftestRule)
			fmt.Fprintln(w)
		}
	}
	return nil
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
