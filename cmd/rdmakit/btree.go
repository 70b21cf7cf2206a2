package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/rpctree"
	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/workload"
)

// btreeDesigns are the ordered-index designs `btree` serves and dials.
var btreeDesigns = []string{"sherman", "rpc"}

// checkBTreeDesign says what is wrong with a --design.
func checkBTreeDesign(d string) error {
	for _, x := range btreeDesigns {
		if d == x {
			return nil
		}
	}
	return fmt.Errorf("--design %q: want sherman or rpc", d)
}

// shermanBytesPerKey is the memory a Sherman tree takes per key, by
// default layout's leaf entry (56 bytes for 16-byte keys and values),
// over leaves that splits leave half full at worst, with the internal
// nodes and lock words on top.
const shermanBytesPerKey = 2*56 + 16

func newBTreeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "btree",
		Short: "Ordered index on remote memory: serve a node, get, put, delete, scan, benchmark",
		Long: `A node holds one B+tree design:

  sherman  Sherman's B+link tree: the node is a plain memory node (a region sized
           by --mem or --keys) and clients do every operation with one-sided
           READs, WRITEs and CASes; the node's CPU takes no part.
  rpc      the "just use RPC" baseline: the tree lives in the node's CPU
           (google/btree) and clients call it, one round trip per operation.

  rdmakit btree serve --design sherman --listen 127.0.0.1:7480
  rdmakit btree put --node 127.0.0.1:7480 apple red
  rdmakit btree get --node 127.0.0.1:7480 apple
  rdmakit btree scan --node 127.0.0.1:7480 --from a --to b --limit 10
  rdmakit btree bench --node 127.0.0.1:7480 --workload c --load --records 100000 --tasks 8

Clients give the node's design with --design (sherman by default). Sherman's node
layout (key and value sizes) is fixed by the first client: every client of a node
must use the same --key-size and --value-size.`,
	}
	cmd.AddCommand(newBTreeServeCmd(), newBTreeGetCmd(), newBTreePutCmd(), newBTreeDelCmd(), newBTreeScanCmd(), newBTreeBenchCmd())
	return cmd
}

func newBTreeServeCmd() *cobra.Command {
	var design, device, listen, metrics, mem string
	var keys int64
	var token tokenFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a B+tree node until interrupted",
		Long: `serve runs a node on the memnode library until SIGINT or SIGTERM. With
--design sherman it registers one region of --mem bytes (default: enough for
--keys keys of Sherman's default layout) that clients lay the tree out in; with
--design rpc it holds the tree in its own memory and answers clients' calls.
A client must present the token (--token, --token-file or $RDMAKIT_TOKEN) when
the node has one. The tree lives only in the node's memory: a restart loses it.`,
		Example: `  rdmakit btree serve --design sherman --keys 1000000
  RDMAKIT_TOKEN=s3cret rdmakit btree serve --design rpc --listen 0.0.0.0:7480 --device tcp://0.0.0.0:7481?advertise=10.0.0.5:7481`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkBTreeDesign(design); err != nil {
				return err
			}
			tok, err := token.value()
			if err != nil {
				return err
			}
			cfg := memnode.Config{Device: device, CM: listen, Metrics: metrics, Token: tok, Logger: slog.Default()}
			var what string
			switch design {
			case "rpc":
				cfg.NewService = rpctree.NewService
				what = "an RPC B-tree (google/btree in this process)"
			default:
				size := keys*shermanBytesPerKey + 16<<20
				if mem != "" {
					if size, err = parseBytes(mem); err != nil {
						return fmt.Errorf("--mem: %w", err)
					}
				} else if keys <= 0 {
					return fmt.Errorf("--keys %d: want at least 1", keys)
				}
				cfg.Memory, cfg.Regions = (size+7)&^7, 1
				what = fmt.Sprintf("a Sherman tree region of %s", formatBytes(cfg.Memory))
			}
			srv, err := memnode.Start(ctx, cfg)
			if err != nil {
				return err
			}
			info := srv.Info()
			fmt.Fprintf(cmd.OutOrStdout(), "serving %s: connect to %s (verbs device %s)\n", what, info.CM, info.Device)
			if info.Metrics != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "metrics at %s\n", info.Metrics)
			}
			<-ctx.Done()
			return srv.Close()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&design, "design", "sherman", "tree design: sherman or rpc")
	fl.StringVar(&device, "device", "tcp://127.0.0.1:0", "verbs device the node is reached through")
	fl.StringVar(&listen, "listen", "127.0.0.1:7480", "connection manager address clients dial")
	fl.StringVar(&metrics, "metrics", "", "HTTP listen address for Prometheus /metrics; empty disables")
	fl.Int64Var(&keys, "keys", 1000000, "keys a sherman node is sized for (when --mem is not given)")
	fl.StringVar(&mem, "mem", "", "bytes of a sherman node's region, e.g. 256MiB (default: sized for --keys)")
	token.add(fl, "auth token clients must present (also passed to the device as token=)")
	return cmd
}

// btreeClientFlags are the flags every client command takes.
type btreeClientFlags struct {
	design, device, node string
	keySize, valueSize   int
	token                tokenFlags
	timeout              time.Duration
	smart                btreeSmartFlags
}

func (f *btreeClientFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.design, "design", "sherman", "the node's design: sherman or rpc")
	fl.StringVar(&f.device, "device", "tcp://127.0.0.1:0", "this client's verbs device (the node must reach it)")
	fl.StringVar(&f.node, "node", "127.0.0.1:7480", "the node's connection manager address")
	fl.IntVar(&f.keySize, "key-size", 16, "sherman: the layout's longest key (every client of a node the same)")
	fl.IntVar(&f.valueSize, "value-size", 16, "sherman: the layout's longest value (every client of a node the same)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on connecting (and on the whole command, but for bench)")
	f.token.add(fl, "the node's auth token")
	f.smart.add(fl)
}

// btreeClient is a dialed tree and its round-trip counter.
type btreeClient struct {
	btree.Tree
	trips func() uint64
}

// dial connects a client of f.design; slots is the operations it keeps
// in flight.
func (f *btreeClientFlags) dial(ctx context.Context, slots int) (btreeClient, error) {
	if err := checkBTreeDesign(f.design); err != nil {
		return btreeClient{}, err
	}
	sc, err := f.smart.config(f.design, slots)
	if err != nil {
		return btreeClient{}, err
	}
	tok, err := f.token.value()
	if err != nil {
		return btreeClient{}, err
	}
	device, err := withQuery(f.device, "token", tok)
	if err != nil {
		return btreeClient{}, err
	}
	if f.design == "rpc" {
		c, err := rpctree.Dial(ctx, rpctree.DialConfig{Device: device, Node: f.node, Token: tok, Slots: min(slots, rpctree.Recvs)})
		if err != nil {
			return btreeClient{}, err
		}
		return btreeClient{Tree: c, trips: func() uint64 { return c.Stats().RoundTrips }}, nil
	}
	c, err := sherman.Dial(ctx, sherman.DialConfig{Device: device, Nodes: []string{f.node}, Token: tok,
		Config: sherman.Config{Slots: slots, Layout: sherman.Layout{KeySize: f.keySize, ValueSize: f.valueSize}, Smart: sc}})
	if err != nil {
		return btreeClient{}, err
	}
	return btreeClient{Tree: c, trips: func() uint64 { return c.Stats().RoundTrips }}, nil
}

// run dials one client and runs do with it, bounded by --timeout.
func (f *btreeClientFlags) run(cmd *cobra.Command, do func(ctx context.Context, t btree.Tree) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	c, err := f.dial(ctx, 4)
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c)
}

func newBTreeGetCmd() *cobra.Command {
	var f btreeClientFlags
	cmd := &cobra.Command{
		Use:     "get KEY",
		Short:   "Print the value of KEY (exit status 1 when it has none)",
		Example: "  rdmakit btree get --node 127.0.0.1:7480 apple",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, t btree.Tree) error {
				v, err := t.Get(ctx, []byte(args[0]), nil)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", v)
				return err
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newBTreePutCmd() *cobra.Command {
	var f btreeClientFlags
	cmd := &cobra.Command{
		Use:     "put KEY VALUE",
		Short:   "Set the value of KEY",
		Example: "  rdmakit btree put --node 127.0.0.1:7480 apple red",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, t btree.Tree) error {
				return t.Put(ctx, []byte(args[0]), []byte(args[1]))
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newBTreeDelCmd() *cobra.Command {
	var f btreeClientFlags
	cmd := &cobra.Command{
		Use:     "del KEY",
		Short:   "Delete KEY (deleting a missing key is not an error)",
		Example: "  rdmakit btree del --node 127.0.0.1:7480 apple",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, t btree.Tree) error {
				return t.Delete(ctx, []byte(args[0]))
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newBTreeScanCmd() *cobra.Command {
	var f btreeClientFlags
	var from, to string
	var limit int
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Print the keys in [--from, --to) in order, a key and its value a line",
		Example: `  rdmakit btree scan --node 127.0.0.1:7480
  rdmakit btree scan --node 127.0.0.1:7480 --from a --to b --limit 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: must not be negative", limit)
			}
			var lo, hi []byte
			if cmd.Flags().Changed("from") {
				lo = []byte(from)
			}
			if cmd.Flags().Changed("to") {
				hi = []byte(to)
			}
			return f.run(cmd, func(ctx context.Context, t btree.Tree) error {
				return printScan(cmd.OutOrStdout(), t.Scan(ctx, lo, hi, limit))
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&from, "from", "", "first key (default: the smallest)")
	cmd.Flags().StringVar(&to, "to", "", "key the scan stops before (default: none)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many keys; 0: all")
	return cmd
}

// printScan prints an iterator's keys and values, tab-separated.
func printScan(w io.Writer, it btree.Iterator) error {
	defer it.Close()
	for it.Next() {
		if _, err := fmt.Fprintf(w, "%s\t%s\n", it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Err()
}

func newBTreeBenchCmd() *cobra.Command {
	var f btreeClientFlags
	var y workload.TreeYCSB
	var load bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a YCSB workload (A, B, C or E) against a node",
		Long: `bench runs YCSB core workloads on the tree with 8-byte keys (record n's key is
FNV-64(n), big-endian) and --value-byte values, from --tasks goroutines that
share one client: a (50% reads, 50% updates), b (95/5), c (reads) or e (95%
scans of 1 to 100 keys, 5% inserts), zipfian 0.99 by default. --load inserts
--records records first; without it the node must hold them already. --smart
runs a Sherman client on Smart's runtime (Smart-BT with all): --tasks spread
over --workers workers, each with its own QP and CQ.`,
		Example: `  rdmakit btree bench --node 127.0.0.1:7480 --workload c --load --records 100000 --tasks 8
  rdmakit btree bench --design rpc --node 127.0.0.1:7480 --workload e --records 100000 --tasks 32
  rdmakit btree bench --node 127.0.0.1:7480 --workload b --records 100000 --tasks 32 --smart all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if y.Threads <= 0 {
				return fmt.Errorf("--tasks %d: want at least 1", y.Threads)
			}
			dctx, cancel := context.WithTimeout(ctx, f.timeout)
			c, err := f.dial(dctx, y.Threads)
			cancel()
			if err != nil {
				return err
			}
			defer c.Close()
			what := f.design
			if sc, _ := f.smart.config(f.design, y.Threads); sc != nil {
				what = fmt.Sprintf("sherman on Smart (%v; %d workers × %d tasks)", sc.Techniques, sc.Workers, sc.Tasks)
			}
			return runTreeBench(ctx, cmd.OutOrStdout(), c, &y, load,
				fmt.Sprintf("%s YCSB-%s (%s), %d tasks", what, y.Workload, y.Distribution, y.Threads))
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&y.Workload, "workload", "c", "YCSB workload: a, b, c or e")
	fl.StringVar(&y.Distribution, "distribution", "zipfian", "key distribution: zipfian (0.99) or uniform")
	fl.Int64Var(&y.Records, "records", 100000, "records in the tree")
	fl.IntVar(&y.ValueSize, "value", 8, "value bytes")
	fl.IntVar(&y.Threads, "tasks", 8, "goroutines issuing operations")
	fl.DurationVar(&y.Duration, "duration", 5*time.Second, "measuring time")
	fl.BoolVar(&load, "load", false, "load the records first")
	return cmd
}

// runTreeBench loads (with load) and runs y on c and prints the report.
func runTreeBench(ctx context.Context, w io.Writer, c btreeClient, y *workload.TreeYCSB, load bool, header string) error {
	if load {
		t0 := time.Now()
		trees := make([]btree.Tree, max(y.Threads, 1))
		for i := range trees {
			trees[i] = c
		}
		if err := y.Load(ctx, trees); err != nil {
			return err
		}
		fmt.Fprintf(w, "loaded %d records of %d bytes in %v\n", y.Records, y.ValueSize, time.Since(t0).Round(time.Millisecond))
	}
	trips0 := c.trips()
	r, err := y.Run(ctx, []btree.Tree{c})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s, %v\n", header, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  ops/s        %.0f\n  p50          %.1f µs\n  p99          %.1f µs\n", r.Rate(), float64(r.P50)/1e3, float64(r.P99)/1e3)
	fmt.Fprintf(w, "  round trips  %.2f per op\n", float64(c.trips()-trips0)/float64(max(r.Ops, 1)))
	fmt.Fprintf(w, "  errors       %d\n", r.Errors)
	if r.FirstErr != nil {
		fmt.Fprintf(w, "  first error  %v\n", r.FirstErr)
	}
	if r.Errors > 0 && errors.Is(r.FirstErr, btree.ErrLayout) {
		return r.FirstErr
	}
	return nil
}
