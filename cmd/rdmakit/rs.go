package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/workload"
)

func newRSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rs",
		Short: "Replicated block store: serve a replica, create a volume, read, write, benchmark",
		Long: `A volume is a fixed number of blocks of one size, replicated on 2f+1 replicas; every
read and write is linearizable and completes while a majority of the replicas answers:

  rdmakit rs replica --listen 127.0.0.1:7481 &
  rdmakit rs replica --listen 127.0.0.1:7482 &
  rdmakit rs replica --listen 127.0.0.1:7483 &
  rdmakit rs create --replicas 127.0.0.1:7481,127.0.0.1:7482,127.0.0.1:7483 --block-size 4KiB --blocks 1024
  rdmakit rs write  --replicas 127.0.0.1:7481,127.0.0.1:7482,127.0.0.1:7483 7 hello
  rdmakit rs read   --replicas 127.0.0.1:7481,127.0.0.1:7482,127.0.0.1:7483 7
  rdmakit rs bench  --replicas 127.0.0.1:7481,127.0.0.1:7482,127.0.0.1:7483 --workload a

The volume's layout (block size, count, replica list) is stored on the replicas:
a client needs only the replica list. --design picks the client's protocol:
prism-rs (ABD on PRISM's indirect READ, ALLOCATE and enhanced CAS: no replica
CPU on the data path) or abd-rpc (the same protocol run by each replica's CPU).
A volume is written through one design.

A replica that restarts comes back empty; start it again with --join (the
volume's replica list) so that it copies every block from the others before it
answers as a member:

  rdmakit rs replica --listen 127.0.0.1:7482 --join 127.0.0.1:7481,127.0.0.1:7482,127.0.0.1:7483

Never run 'rs create' again for a restarted replica: it would make it a member
with an empty volume, and a later failure of another replica could lose writes.`,
	}
	cmd.AddCommand(newRSReplicaCmd(), newRSCreateCmd(), newRSReadCmd(), newRSWriteCmd(), newRSBenchCmd())
	return cmd
}

func newRSReplicaCmd() *cobra.Command {
	var device, listen, metrics, maxMem, join, self string
	var token tokenFlags
	var probe time.Duration
	var maxConns int
	cmd := &cobra.Command{
		Use:   "replica",
		Short: "Serve one replica of a block store volume until interrupted",
		Long: `replica serves one replica from the memory of a verbs device (--device) to the
clients that connect through the connection manager at --listen, until SIGINT
or SIGTERM. It starts empty: 'rdmakit rs create' lays the volume out on every
replica. A client must present the token (--token, --token-file or
$RDMAKIT_TOKEN) when the replica has one; a client that is gone (--probe) has
its QP, CQ and goroutine freed, and its client id released. The data lives
only in the replica's memory: a replica that restarts comes back empty, and
must be started with --join, the volume's replica list (this replica's
--listen address in it, or --self when it is named otherwise there): it learns
the layout from the others, copies every block's latest value from a majority
of them, and only then answers clients as a member. While fewer than that
answer it keeps trying (and says so in its log); SIGTERM stops it.
--listen also takes tcp://HOST:PORT; --device shm://NAME serves clients on this
host through shared memory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			tok, err := token.value()
			if err != nil {
				return err
			}
			listen = strings.TrimPrefix(listen, "tcp://")
			if device == "" {
				host, _, ok := strings.Cut(listen, ":")
				if !ok || host == "" {
					host = "127.0.0.1"
				}
				device = "tcp://" + host + ":0"
			}
			mem, err := parseBytes(maxMem)
			if err != nil || mem <= 0 {
				return fmt.Errorf("--max-memory %q: want a size such as 1GiB", maxMem)
			}
			if maxConns <= 0 {
				return fmt.Errorf("--max-conns %d: want at least 1", maxConns)
			}
			if probe < 0 {
				return fmt.Errorf("--probe %v: must not be negative", probe)
			} else if probe == 0 {
				probe = -1 // disabled
			}
			rcfg := replica.Config{MaxMemory: mem}
			if join != "" {
				jc := &replica.JoinConfig{Replicas: strings.Split(join, ","), Self: self, Token: tok}
				if jc.Self == "" {
					jc.Self = listen
				}
				if err := blockstore.CheckReplicas(jc.Replicas); err != nil {
					return fmt.Errorf("--join: %w", err)
				}
				if !slices.Contains(jc.Replicas, jc.Self) {
					return fmt.Errorf("--join: this replica (%s) is not in %s: give --self", jc.Self, join)
				}
				rcfg.Join = jc
			}
			srv, err := memnode.Start(ctx, memnode.Config{Device: device, CM: listen, Metrics: metrics, Token: tok, Probe: probe, MaxClients: maxConns,
				NewService: replica.Service(rcfg, nil), Logger: slog.Default()})
			if err != nil {
				return err
			}
			info := srv.Info()
			fmt.Fprintf(cmd.OutOrStdout(), "serving a block store replica: connect to %s (verbs device %s)\n", info.CM, info.Device)
			if info.Metrics != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "metrics at %s\n", info.Metrics)
			}
			<-ctx.Done()
			return srv.Close()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&device, "device", "", "verbs device the replica's memory is reached through (default tcp://<--listen host>:0)")
	fl.StringVar(&listen, "listen", "127.0.0.1:7480", "connection manager address clients dial (host:port or tcp://host:port)")
	fl.StringVar(&metrics, "metrics", "", "HTTP listen address for Prometheus /metrics; empty disables")
	fl.StringVar(&maxMem, "max-memory", "1GiB", "largest volume the replica holds (blocks, their spare buffers and the slots)")
	fl.DurationVar(&probe, "probe", memnode.DefaultProbe, "how often each client is checked (a 0-byte READ); a gone client's QP, CQ and goroutine are freed. 0 disables")
	fl.IntVar(&maxConns, "max-conns", memnode.DefaultMaxClients, "clients served at once; more are refused")
	fl.StringVar(&join, "join", "", "rejoin the volume of these replicas (comma-separated cm addresses, this one included): copy it from them before serving")
	fl.StringVar(&self, "self", "", "this replica's address in --join (default --listen)")
	token.add(fl, "auth token clients must present (also passed to the device as token=)")
	return cmd
}

// rsClientFlags are the flags every client command takes.
type rsClientFlags struct {
	replicas string
	device   string
	design   string
	token    tokenFlags
	timeout  time.Duration
}

func (f *rsClientFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.replicas, "replicas", "", "the volume's replicas: their connection manager addresses, comma-separated (required)")
	fl.StringVar(&f.device, "device", "tcp://127.0.0.1:0", "the client's own verbs device (the replicas must reach it)")
	fl.StringVar(&f.design, "design", "prism-rs", "client protocol: prism-rs or abd-rpc")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the replicas (connecting, and each operation)")
	f.token.add(fl, "auth token the replicas require")
}

// list parses --replicas.
func (f *rsClientFlags) list() ([]string, error) {
	var rs []string
	for _, r := range strings.Split(f.replicas, ",") {
		if r = strings.TrimPrefix(strings.TrimSpace(r), "tcp://"); r != "" {
			rs = append(rs, r)
		}
	}
	if err := blockstore.CheckReplicas(rs); err != nil {
		return nil, fmt.Errorf("--replicas: %w", err)
	}
	return rs, nil
}

// open connects a client of the volume on f's replicas; with blockSize
// > 0 it creates the volume first (blocks of blockSize bytes).
func (f *rsClientFlags) open(ctx context.Context, blockSize int, blocks uint64) (blockstore.Store, error) {
	rs, err := f.list()
	if err != nil {
		return nil, err
	}
	tok, err := f.token.value()
	if err != nil {
		return nil, err
	}
	device, err := withQuery(f.device, "token", tok)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	switch f.design {
	case "prism-rs":
		cfg := prismrs.Config{Device: device, Replicas: rs, Token: tok}
		if blockSize > 0 {
			return prismrs.Create(ctx, cfg, blockSize, blocks)
		}
		return prismrs.Dial(ctx, cfg)
	case "abd-rpc":
		cfg := abdrpc.Config{Device: device, Replicas: rs, Token: tok}
		if blockSize > 0 {
			if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: blockSize, Blocks: blocks, Replicas: rs}); err != nil {
				return nil, err
			}
		}
		return abdrpc.Dial(ctx, cfg)
	}
	return nil, fmt.Errorf("--design %q: want prism-rs or abd-rpc", f.design)
}

func newRSCreateCmd() *cobra.Command {
	var f rsClientFlags
	var size string
	var blocks uint64
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a volume on its replicas",
		Long: `create lays a volume of --blocks blocks of --block-size bytes out on every
replica of --replicas (a majority must answer). Creating the same volume
again succeeds and changes nothing; another layout on replicas that hold a
volume fails. A volume a majority holds already is not created on the replicas
that lack it (one that missed the create, or restarted): that would make them
members with none of its writes. Start those with 'rs replica --join' instead,
which copies the volume from the others before it serves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := parseBytes(size)
			if err != nil {
				return fmt.Errorf("--block-size %q: %w", size, err)
			}
			if n < blockstore.MinBlockSize || n > blockstore.MaxBlockSize {
				return fmt.Errorf("--block-size %s: %w (%d B to %d KiB)", size, blockstore.ErrBlockSize, blockstore.MinBlockSize, blockstore.MaxBlockSize>>10)
			}
			// A volume a majority holds already is left as it is: creating
			// it on the replicas that lack it would make them members with
			// none of its writes.
			if s, err := f.open(cmd.Context(), 0, 0); err == nil {
				defer s.Close()
				l := s.Layout()
				if l.BlockSize != int(n) || l.Blocks != blocks {
					return fmt.Errorf("%w: the replicas hold %d blocks of %d bytes", replica.ErrExists, l.Blocks, l.BlockSize)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "volume of %d blocks of %d bytes on %s (it existed)\n", l.Blocks, l.BlockSize, strings.Join(l.Replicas, ","))
				if c, ok := s.(interface{ Connected() int }); ok && c.Connected() < len(l.Replicas) {
					fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d replicas hold it; start the others with 'rdmakit rs replica --join %s' to copy it\n",
						c.Connected(), len(l.Replicas), strings.Join(l.Replicas, ","))
				}
				return nil
			}
			s, err := f.open(cmd.Context(), int(n), blocks)
			if err != nil {
				return err
			}
			defer s.Close()
			l := s.Layout()
			fmt.Fprintf(cmd.OutOrStdout(), "volume of %d blocks of %d bytes on %s\n", l.Blocks, l.BlockSize, strings.Join(l.Replicas, ","))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&size, "block-size", "4KiB", "bytes per block, 512 B to 64 KiB")
	cmd.Flags().Uint64Var(&blocks, "blocks", 1024, "blocks in the volume")
	return cmd
}

// blockID parses a block id argument.
func blockID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("block id %q: want a number", s)
	}
	return id, nil
}

func newRSReadCmd() *cobra.Command {
	var f rsClientFlags
	var format string
	cmd := &cobra.Command{
		Use:   "read ID",
		Short: "Read a block",
		Long: `read prints block ID's latest value. --format text prints it up to its first
zero byte; hex prints every byte as hexadecimal; raw writes the block's bytes
as they are (to redirect into a file).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := blockID(args[0])
			if err != nil {
				return err
			}
			if format != "text" && format != "hex" && format != "raw" {
				return fmt.Errorf("--format %q: want text, hex or raw", format)
			}
			s, err := f.open(cmd.Context(), 0, 0)
			if err != nil {
				return err
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			b, err := s.Read(ctx, id, nil)
			if err != nil {
				return err
			}
			return printBlock(cmd.OutOrStdout(), b, format)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&format, "format", "text", "output: text, hex or raw")
	return cmd
}

// printBlock writes b in format (text, hex or raw).
func printBlock(w io.Writer, b []byte, format string) error {
	var err error
	switch format {
	case "raw":
		_, err = w.Write(b)
	case "hex":
		_, err = io.WriteString(w, hex.Dump(b))
	default:
		if i := strings.IndexByte(string(b), 0); i >= 0 {
			b = b[:i]
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
	}
	return err
}

func newRSWriteCmd() *cobra.Command {
	var f rsClientFlags
	var file string
	cmd := &cobra.Command{
		Use:   "write ID [DATA]",
		Short: "Write a block",
		Long: `write sets block ID to DATA, or to the contents of --file (- for stdin), padded
with zeros to the block size; longer data is refused.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := blockID(args[0])
			if err != nil {
				return err
			}
			var data []byte
			switch {
			case len(args) == 2 && file != "":
				return fmt.Errorf("DATA and --file: give one")
			case len(args) == 2:
				data = []byte(args[1])
			case file == "-":
				data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), blockstore.MaxBlockSize+1))
			case file != "":
				data, err = readLimited(file, blockstore.MaxBlockSize+1)
			default:
				return fmt.Errorf("give DATA or --file")
			}
			if err != nil {
				return err
			}
			s, err := f.open(cmd.Context(), 0, 0)
			if err != nil {
				return err
			}
			defer s.Close()
			bs := s.Layout().BlockSize
			if len(data) > bs {
				return fmt.Errorf("%w: %d bytes for %d-byte blocks", blockstore.ErrBlockSize, len(data), bs)
			}
			block := make([]byte, bs)
			copy(block, data)
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			if err := s.Write(ctx, id, block); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote block %d (%d bytes of data)\n", id, len(data))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&file, "file", "", "write this file's contents (- for stdin)")
	return cmd
}

// readLimited reads at most n bytes of the file at path.
func readLimited(path string, n int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, n))
}

func newRSBenchCmd() *cobra.Command {
	var f rsClientFlags
	var y workload.YCSB
	var clients int
	var load bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a YCSB workload (go-ycsb) over a volume's block ids",
		Long: `bench runs YCSB over the volume's blocks: record N is block N, a read reads it
and an update writes a whole block. --clients connections (each its own client
id) share the --tasks goroutines. The volume needs at least --records+1 blocks
(go-ycsb's zipfian draws record --records too).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if clients <= 0 {
				return fmt.Errorf("--clients %d: want at least 1", clients)
			}
			if w := strings.ToLower(y.Workload); w != "a" && w != "b" && w != "c" {
				return fmt.Errorf("--workload %q: want a, b or c (whole-block reads and updates)", y.Workload)
			}
			var dbs []ycsb.DB
			var trips []func() uint64
			for range clients {
				s, err := f.open(ctx, 0, 0)
				if err != nil {
					return err
				}
				defer s.Close()
				if l := s.Layout(); uint64(y.Records) >= l.Blocks {
					return fmt.Errorf("--records %d: the volume has %d blocks (at least records+1 needed)", y.Records, l.Blocks)
				}
				y.ValueSize = s.Layout().BlockSize
				dbs = append(dbs, workload.BlockDB{Store: s})
				if rt, ok := s.(interface{ RoundTrips() uint64 }); ok {
					trips = append(trips, rt.RoundTrips)
				}
			}
			y.OrderedKeys = true
			b := ycsbBench{y: &y, dbs: dbs, load: load, what: "blocks",
				header: fmt.Sprintf("%s YCSB-%s (%s), %d tasks over %d clients", f.design, y.Workload, y.Distribution, y.Threads, clients)}
			if len(trips) == len(dbs) {
				b.trips = func() (n uint64) {
					for _, t := range trips {
						n += t()
					}
					return n
				}
			}
			return b.run(ctx, cmd.OutOrStdout())
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&y.Workload, "workload", "c", "YCSB workload: a, b or c (reads and updates of whole blocks)")
	cmd.Flags().StringVar(&y.Distribution, "distribution", "uniform", "block distribution: uniform or zipfian (0.99)")
	cmd.Flags().Int64Var(&y.Records, "records", 1000, "blocks the workload uses (ids 0 to records)")
	cmd.Flags().IntVar(&y.Threads, "tasks", 8, "goroutines issuing operations")
	cmd.Flags().IntVar(&clients, "clients", 4, "client connections the tasks share")
	cmd.Flags().DurationVar(&y.Duration, "duration", 5*time.Second, "measuring time")
	cmd.Flags().BoolVar(&load, "load", false, "write every block first")
	return cmd
}
