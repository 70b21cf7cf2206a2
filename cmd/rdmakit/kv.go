package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/workload"
)

func newKVCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "Key-value stores on remote memory: serve a node, get, put, delete, benchmark",
		Long: `A node serves one store design (pilaf, prism-kv, race or smart-ht) from its memory:

  rdmakit kv serve --store prism-kv --listen 127.0.0.1:7470
  rdmakit kv put --node 127.0.0.1:7470 --store prism-kv hello world
  rdmakit kv get --node 127.0.0.1:7470 --store prism-kv hello
  rdmakit kv bench --node 127.0.0.1:7470 --store prism-kv --workload c --load

Clients connect through the node's connection manager (--listen) and then talk to its memory
with one-sided operations over the verbs device (--device, tcp by default). RACE and
Smart-HT share a node layout: a race node serves smart-ht clients too.`,
	}
	cmd.AddCommand(newKVServeCmd(), newKVGetCmd(), newKVPutCmd(), newKVDelCmd(), newKVBenchCmd())
	return cmd
}

func newKVServeCmd() *cobra.Command {
	var store, device, listen, metrics string
	var token tokenFlags
	var keys int64
	var value int
	var probe time.Duration
	var maxConns, procs int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a key-value store node until interrupted",
		Long: `serve lays out one store design in the memory of a verbs device and serves it
to the clients that connect through the connection manager at --listen, until
SIGINT or SIGTERM. The node runs on the memnode library: handshakes run
concurrently (a stalled one delays nobody), a client must present the token
(--token, --token-file or $RDMAKIT_TOKEN) when the node has one, and a client
that is gone (--probe) has its QP, CQ and goroutine freed. Counters (the
node's, the soft NIC's and the store's: keys, free slots, free memory) are
served in Prometheus format at http://--metrics/metrics. The data lives
only in the node's memory: a restart loses it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := stores.CheckDesign(store); err != nil {
				return fmt.Errorf("--store: %w", err)
			}
			tok, err := token.value()
			if err != nil {
				return err
			}
			if maxConns <= 0 {
				return fmt.Errorf("--max-conns %d: want at least 1", maxConns)
			}
			if procs < 0 {
				return fmt.Errorf("--procs %d: must not be negative", procs)
			} else if procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs)) // as it was once the node stops (tests run it in-process)
			}
			if probe < 0 {
				return fmt.Errorf("--probe %v: must not be negative", probe)
			} else if probe == 0 {
				probe = -1 // disabled
			}
			srv, err := memnode.Start(ctx, memnode.Config{Device: device, CM: listen, Metrics: metrics, Token: tok, Probe: probe, MaxClients: maxConns,
				NewService: stores.Service(store, keys, value), Logger: slog.Default()})
			if err != nil {
				return err
			}
			info := srv.Info()
			fmt.Fprintf(cmd.OutOrStdout(), "serving %s for about %d keys: connect to %s (verbs device %s)\n", info.Service, keys, info.CM, info.Device)
			if info.Metrics != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "metrics at %s\n", info.Metrics)
			}
			<-ctx.Done()
			return srv.Close()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&store, "store", "prism-kv", "store design: pilaf, prism-kv, race or smart-ht")
	fl.StringVar(&device, "device", "tcp://127.0.0.1:0", "verbs device the node's memory is reached through")
	fl.StringVar(&listen, "listen", "127.0.0.1:7470", "connection manager address clients dial")
	fl.StringVar(&metrics, "metrics", "127.0.0.1:9470", "HTTP listen address for Prometheus /metrics; empty disables")
	fl.Int64Var(&keys, "keys", 1000000, "keys the node is sized for")
	fl.IntVar(&value, "value", 64, "typical value bytes (sizes the node's item memory)")
	fl.DurationVar(&probe, "probe", memnode.DefaultProbe, "how often each client is checked (a 0-byte READ); a gone client's QP, CQ and goroutine are freed. 0 disables")
	fl.IntVar(&maxConns, "max-conns", memnode.DefaultMaxClients, "clients served at once; more are refused (\"node full\"). A tcp device also gets maxconns= for them unless --device sets it")
	fl.IntVar(&procs, "procs", 0, "processors the node's Go runtime runs on (GOMAXPROCS), as memcached's -t; 0 keeps the default (every core, or $GOMAXPROCS). "+
		"With 1, a tcp node's soft NIC wakes no second thread per frame: less CPU per request when the cores are shared")
	token.add(fl, "auth token clients must present (also passed to the device as token=)")
	return cmd
}

// kvConn is a client connection to a node.
type kvConn struct {
	dev    verbs.Device
	conns  []*cm.Conn
	stores []stores.Client
	rt     *smart.Runtime // Smart-HT's workers
	mu     sync.Mutex     // conns, from the runtime's connects
}

func (k *kvConn) Close() {
	for _, s := range k.stores {
		s.Close()
	}
	if k.rt != nil {
		k.rt.Close()
	}
	for _, c := range k.conns {
		c.Close()
	}
	k.dev.Close()
}

// dialKV opens n client connections of design to the node at addr.
func dialKV(ctx context.Context, design, device, addr, token string, n int) (*kvConn, error) {
	if err := stores.CheckDesign(design); err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	device, err := withQuery(device, "token", token)
	if err != nil {
		return nil, err
	}
	hello := memnode.Hello{Service: design, Token: token}.Marshal()
	dev, err := verbs.Open(device)
	if err != nil {
		return nil, err
	}
	k := &kvConn{dev: dev}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	var cache *race.SlotCache
	if design == "smart-ht" {
		cache = race.NewSlotCache(0)
		// The workers' QPs: more connections to the node, carrying only
		// one-sided requests.
		connect := func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
			c, err := cm.Dial(ctx, dev, addr, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap, Access: verbs.AccessAll,
				MinRNRTimer: stores.ClientMinRNR, RNRRetry: stores.ClientRNRRetry, Timeout: stores.ClientTimeout, PrivateData: hello})
			if err != nil {
				return nil, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
			}
			k.mu.Lock()
			k.conns = append(k.conns, c)
			k.mu.Unlock()
			return c.QP(), nil
		}
		if k.rt, err = stores.NewRuntime(ctx, dev, pd, connect, 0); err != nil {
			k.Close()
			return nil, err
		}
	}
	for i := 0; i < n; i++ {
		cq, err := dev.CreateCQ(4096)
		if err != nil {
			k.Close()
			return nil, err
		}
		c, err := cm.Dial(ctx, dev, addr, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap, Access: verbs.AccessAll,
			MinRNRTimer: stores.ClientMinRNR, RNRRetry: stores.ClientRNRRetry, Timeout: stores.ClientTimeout, PrivateData: hello})
		if err != nil {
			k.Close()
			return nil, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
		}
		k.conns = append(k.conns, c)
		s, err := stores.NewClient(ctx, design, pd, c.QP(), cq, stores.ClientOptions{Cache: cache, Runtime: k.rt})
		if err != nil {
			k.Close()
			return nil, err
		}
		k.stores = append(k.stores, s)
	}
	return k, nil
}

// kvClientFlags are the flags every client command takes.
type kvClientFlags struct {
	store, device, node string
	token               tokenFlags
	timeout             time.Duration
}

func (f *kvClientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.store, "store", "prism-kv", "store design: pilaf, prism-kv, race or smart-ht")
	cmd.Flags().StringVar(&f.device, "device", "tcp://127.0.0.1:0", "this client's verbs device (the node must reach it)")
	cmd.Flags().StringVar(&f.node, "node", "127.0.0.1:7470", "the node's connection manager address")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on the whole command")
	f.token.add(cmd.Flags(), "the node's auth token")
}

// dial opens conns client connections to the node.
func (f *kvClientFlags) dial(ctx context.Context, conns int) (*kvConn, error) {
	tok, err := f.token.value()
	if err != nil {
		return nil, err
	}
	return dialKV(ctx, f.store, f.device, f.node, tok, conns)
}

func (f *kvClientFlags) run(cmd *cobra.Command, do func(ctx context.Context, s kv.Store) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	k, err := f.dial(ctx, 1)
	if err != nil {
		return err
	}
	defer k.Close()
	return do(ctx, k.stores[0])
}

func newKVGetCmd() *cobra.Command {
	var f kvClientFlags
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print the value of KEY (exit status 1 when it has none)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, s kv.Store) error {
				v, err := s.Get(ctx, []byte(args[0]), nil)
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

func newKVPutCmd() *cobra.Command {
	var f kvClientFlags
	cmd := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Set the value of KEY",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, s kv.Store) error {
				return s.Put(ctx, []byte(args[0]), []byte(args[1]))
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newKVDelCmd() *cobra.Command {
	var f kvClientFlags
	cmd := &cobra.Command{
		Use:   "del KEY",
		Short: "Delete KEY (deleting a missing key is not an error)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, s kv.Store) error {
				return s.Delete(ctx, []byte(args[0]))
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newKVBenchCmd() *cobra.Command {
	var f kvClientFlags
	var y workload.YCSB
	var conns int
	var load bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a YCSB workload (go-ycsb) against a node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dctx, cancel := context.WithTimeout(ctx, f.timeout)
			k, err := f.dial(dctx, conns)
			cancel()
			if err != nil {
				return err
			}
			defer k.Close()
			dbs := make([]ycsb.DB, len(k.stores))
			for i, s := range k.stores {
				dbs[i] = workload.DB{Store: s}
			}
			return ycsbBench{y: &y, dbs: dbs, load: load, what: "records",
				header: fmt.Sprintf("%s YCSB-%s (%s), %d tasks over %d connections", f.store, y.Workload, y.Distribution, y.Threads, conns),
				trips: func() (n uint64) {
					for _, s := range k.stores {
						n += s.RoundTrips()
					}
					return n
				}}.run(ctx, cmd.OutOrStdout())
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&y.Workload, "workload", "c", "YCSB workload: a, b, c, d or f")
	cmd.Flags().StringVar(&y.Distribution, "distribution", "uniform", "key distribution: uniform or zipfian (0.99)")
	cmd.Flags().Int64Var(&y.Records, "records", 100000, "records in the store")
	cmd.Flags().IntVar(&y.ValueSize, "value", 64, "value bytes")
	cmd.Flags().IntVar(&y.Threads, "tasks", 8, "goroutines issuing operations")
	cmd.Flags().IntVar(&conns, "conns", 4, "client connections the tasks share")
	cmd.Flags().DurationVar(&y.Duration, "duration", 5*time.Second, "measuring time")
	cmd.Flags().BoolVar(&load, "load", false, "load the records first")
	return cmd
}
