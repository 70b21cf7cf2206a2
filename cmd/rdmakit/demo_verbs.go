package main

import (
	"fmt"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench/perf"
	"github.com/rdmakit/rdmakit/verbs"
)

// demoSizes are the bandwidth sizes the demo shows beside 8 bytes.
var demoSizes = []int{4 << 10, 64 << 10}

// demoKinds explains each operation in a few words.
var demoKinds = map[perf.Op]string{
	perf.Read:  "one-sided: fetch remote bytes",
	perf.Write: "one-sided: store remote bytes",
	perf.Send:  "two-sided: peer posts a RECV",
	perf.CAS:   "8-byte atomic compare-and-swap",
	perf.FAA:   "8-byte atomic fetch-and-add",
}

func newDemoVerbsCmd() *cobra.Command {
	var (
		duration time.Duration
		poll     string
	)
	cmd := &cobra.Command{
		Use:   "verbs",
		Short: "A short tour of the verbs: latency and throughput of every operation over the loop fabric",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := pollFlag(poll)
			if err != nil {
				return err
			}
			if duration <= 0 {
				return fmt.Errorf("--duration must be positive")
			}
			return runDemo(cmd, duration, p)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 250*time.Millisecond, "measuring time per number")
	cmd.Flags().StringVar(&poll, "poll", "adaptive", "polling policy: adaptive, busy or event")
	return cmd
}

// demoRow holds one operation's numbers; nil entries were not measured.
type demoRow struct {
	lat  *perf.Measurement
	rate *perf.Measurement
	bw   []*perf.Measurement
}

func runDemo(cmd *cobra.Command, d time.Duration, poll verbs.PollPolicy) error {
	client, server, err := perfURIs("")
	if err != nil {
		return err
	}
	pair, err := perf.Open(perf.Config{Client: client, Server: server, Poll: poll})
	if err != nil {
		return err
	}
	defer pair.Close()
	cfg := pair.Config()
	ctx, stop := cmd.Context(), perf.Stop{Duration: d}
	measure := func(c perf.Cell) (*perf.Measurement, error) {
		m, err := pair.Measure(ctx, c, stop)
		return &m, err
	}
	rows := map[perf.Op]*demoRow{}
	for _, op := range perf.Ops {
		r := &demoRow{}
		rows[op] = r
		if r.lat, err = measure(perf.Cell{Op: op, Test: perf.Lat, Size: 8}); err != nil {
			return err
		}
		if r.rate, err = measure(perf.Cell{Op: op, Test: perf.BW, Size: 8}); err != nil {
			return err
		}
		for _, n := range demoSizes {
			var m *perf.Measurement
			if !op.Atomic() {
				if m, err = measure(perf.Cell{Op: op, Test: perf.BW, Size: n}); err != nil {
					return err
				}
			}
			r.bw = append(r.bw, m)
		}
	}

	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "rdmakit demo verbs: verbs between two nodes of the in-process %s fabric\n", pair.Transport())
	fmt.Fprintf(w, "RC queue pair %s -> %s, poll %v, GOMAXPROCS %d, %v per number\n\n",
		cfg.Client, cfg.Server, cfg.Poll, runtime.GOMAXPROCS(0), d)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprint(tw, "OP\tWHAT IT IS\tLAT p50\tLAT p99\tRATE 8 B")
	for _, n := range demoSizes {
		fmt.Fprintf(tw, "\tBW %d KiB", n>>10)
	}
	fmt.Fprintln(tw)
	for _, op := range perf.Ops {
		r := rows[op]
		fmt.Fprintf(tw, "%s\t%s\t%.3f µs\t%.3f µs\t%.2f Mops", op.Opcode(), demoKinds[op],
			float64(r.lat.Lat.P50)/1e3, float64(r.lat.Lat.P99)/1e3, r.rate.Mops())
		for _, m := range r.bw {
			if m == nil {
				fmt.Fprint(tw, "\t—")
			} else {
				fmt.Fprintf(tw, "\t%.2f GB/s", m.GBps())
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, `
What the numbers mean:
  LAT p50/p99  time from posting one 8-byte request to polling its completion; half the
               requests finish within p50, 99%% within p99 (SEND: half an echoed round trip)
  RATE 8 B     millions of 8-byte operations per second with %d in flight, one completion
               per %d requests (selective signaling)
  BW n KiB     payload bytes per second (1 GB = 10^9 B) with the same window
  —            atomics are 8 bytes only
Both nodes run in this process, so these are the software NIC's costs (copies, locks,
completion queues), not a network's. More: rdmakit perf --help, rdmakit bench run perf --quick
`, cfg.Window, cfg.Batch)
	return nil
}
