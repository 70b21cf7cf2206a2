package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/objstore/node"
)

func newObjstoreTuneCmd() *cobra.Command {
	var peer, peerSocket, device, sizes, register string
	var runs int
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Measure SEND/RECV against READ by object size and print the hybrid's threshold",
		Long: `tune fetches one object of each size (1 KiB to 1 MiB in powers of 2 unless --sizes)
from a holder by SEND/RECV only and by READ only, --runs times each after a warm-up, and
prints the median latencies and the size from which READ should be used (the cut whose
choices lose least against the faster protocol at each size, so one noisy size does not
move it): the
--threshold to give objstore serve. The holder is a store tune starts in this process
unless --peer names one (its --listen address) with --peer-socket (its --socket, where
tune creates the objects and deletes them afterwards). The threshold depends on the
transport: measure with the --device the stores use (tcp://, or shm://NAME for stores
on one host, where tune's own holder is shm://NAME-holder).`,
		Example: `  rdmakit objstore tune
  rdmakit objstore tune --device shm://tune
  rdmakit objstore tune --peer 10.0.0.2:7600 --peer-socket @a --device tcp://10.0.0.1:0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := node.TuneConfig{Peer: peer, PeerSocket: peerSocket, Device: device, Register: register, Runs: runs}
			if sizes != "" {
				for _, s := range strings.Split(sizes, ",") {
					n, err := parseBytes(s)
					if err != nil {
						return fmt.Errorf("--sizes: %w", err)
					}
					cfg.Sizes = append(cfg.Sizes, int(n))
				}
			}
			res, err := node.Tune(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "size\tsendrecv p50\tread p50\tfaster\t")
			for _, p := range res.Points {
				faster := "sendrecv"
				if p.Read < p.SendRecv {
					faster = "read"
				}
				fmt.Fprintf(tw, "%s\t%v\t%v\t%s\t\n", formatBytes(int64(p.Size)), p.SendRecv.Round(time.Microsecond/10), p.Read.Round(time.Microsecond/10), faster)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if res.Found {
				fmt.Fprintf(out, "threshold: %s (READ from this size on loses least; pass --threshold %d to objstore serve)\n", formatBytes(int64(res.Threshold)), res.Threshold)
			} else {
				fmt.Fprintf(out, "threshold: none found (SEND/RECV everywhere loses least up to the largest size; pass --threshold %d to keep SEND/RECV)\n", res.Threshold)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&peer, "peer", "", "a holder's --listen address (default: start a holder in this process)")
	fl.StringVar(&peerSocket, "peer-socket", "", "that holder's --socket, where the measured objects are created")
	fl.StringVar(&device, "device", node.DefaultDevice, "verbs device of the fetching side")
	fl.StringVar(&sizes, "sizes", "", "comma-separated object sizes, e.g. 4KiB,16KiB,64KiB (default 1 KiB to 1 MiB, powers of 2)")
	fl.IntVar(&runs, "runs", 20, "timed fetches per size and protocol")
	fl.StringVar(&register, "register", "", "object or arena registration, as objstore serve's --register (default: by --device)")
	return cmd
}
