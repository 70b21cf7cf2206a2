package main

import (
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench"
	_ "github.com/rdmakit/rdmakit/bench/objexp"  // objstore-fetch, objstore-local
	_ "github.com/rdmakit/rdmakit/bench/rsexp"   // rs-ycsb
	_ "github.com/rdmakit/rdmakit/bench/sockexp" // sock-latency, sock-throughput, sock-http
	_ "github.com/rdmakit/rdmakit/bench/txnexp"  // txn-ycsbt, txn-peers
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "List and run experiments; each writes JSON, Markdown and a PNG plot",
	}
	cmd.AddCommand(newBenchListCmd(), newBenchRunCmd())
	return cmd
}

func newBenchListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered experiments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDESCRIPTION")
			for _, e := range bench.List() {
				fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.Description)
			}
			return tw.Flush()
		},
	}
}

func newBenchRunCmd() *cobra.Command {
	var (
		quick     bool
		duration  time.Duration
		out       string
		transport string
		poll      string
		only      []string
	)
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "Run an experiment, print its table and write NAME.json, NAME.md and NAME.png",
		Example: `  rdmakit bench run perf --quick
  rdmakit bench run perf --duration 500ms --poll busy --out results/
  rdmakit bench run txn-peers --only PostgreSQL,PRISM-TX/shm`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			var names []string
			for _, e := range bench.List() {
				names = append(names, e.Name)
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := pollFlag(poll)
			if err != nil {
				return err
			}
			if duration < 0 {
				return fmt.Errorf("--duration %v is negative", duration)
			}
			r, paths, err := bench.Run(cmd.Context(), args[0], bench.Options{
				Duration: duration, Quick: quick, OutDir: out, Transport: transport, Poll: p,
				Progress: progressWriter(cmd), Log: slog.Default(), Node: selfNode, Command: selfCommand, Only: only,
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if err := bench.WriteMarkdown(w, r); err != nil {
				return err
			}
			fmt.Fprintln(w)
			for _, p := range paths {
				fmt.Fprintln(w, "wrote", p)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&quick, "quick", false, "shrink durations and sweeps so the run takes a few seconds")
	fl.DurationVar(&duration, "duration", 0, "measuring time per data point (default: the experiment's)")
	fl.StringVar(&out, "out", "results", "directory for NAME.json, NAME.md and NAME.png")
	fl.StringVar(&transport, "transport", "", "device URI base, e.g. loop://lab (default: a fresh loop fabric)")
	fl.StringVar(&poll, "poll", "adaptive", "polling policy: adaptive, busy or event")
	fl.StringSliceVar(&only, "only", nil, "run only these systems of a comparison, e.g. PostgreSQL,PRISM-TX/shm (NAME or NAME/TRANSPORT; the experiment's docs name them)")
	return cmd
}
