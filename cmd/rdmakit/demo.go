package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/bench"
)

func newDemoCmd() *cobra.Command {
	var (
		keys     int64
		duration time.Duration
		out      string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The tour: four key-value stores on remote memory (Pilaf, PRISM-KV, RACE, Smart-HT) under YCSB",
		Long: `demo starts an embedded memory node (the in-process loop fabric), loads --keys keys into
each of the four key-value stores and runs YCSB-A (zipfian) and YCSB-C (uniform) on each for
--duration, with a progress bar. It prints a table and writes results/kv-demo.{md,json,png}.
"rdmakit demo verbs" is the tour of the verbs themselves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration <= 0 || keys <= 0 {
				return fmt.Errorf("--duration and --keys must be positive")
			}
			bench.KVDemoRecords = keys
			r, paths, err := bench.Run(cmd.Context(), "kv-demo", bench.Options{Duration: duration, OutDir: out,
				Progress: progressWriter(cmd)})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "rdmakit demo: %d keys in each of four key-value stores on an embedded node, YCSB for %v per row\n\n", keys, duration)
			fmt.Fprintln(w, bench.Table(r))
			fmt.Fprint(w, `What the columns mean:
  rate         operations per second, from 8 goroutines over 4 connections
  p50, p99     time one operation takes: half finish within p50, 99% within p99
  round_trips  request lists and RPCs per operation: Pilaf GET = READ entry + READ extent,
               PRISM-KV GET = 1 indirect READ, RACE GET = buckets + block, Smart-HT = 1 on a cache hit
  node_cpu     the node's own CPU per operation: Pilaf's PUT handlers, PRISM-KV's free-list
               restocking; one-sided operations cost it nothing (its NIC serves them)
`)
			for _, p := range paths {
				fmt.Fprintln(w, "wrote", p)
			}
			fmt.Fprintln(w, "More: rdmakit bench run kv-ycsb (over tcp), rdmakit bench run kv-peers (vs memcached and Redis), docs/kv.md")
			return nil
		},
	}
	cmd.Flags().Int64Var(&keys, "keys", 100000, "keys loaded into each store")
	cmd.Flags().DurationVar(&duration, "duration", 2*time.Second, "measuring time per workload and store")
	cmd.Flags().StringVar(&out, "out", "results", "directory for kv-demo.{md,json,png} (empty: none)")
	cmd.AddCommand(newDemoVerbsCmd())
	return cmd
}
