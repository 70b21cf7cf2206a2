package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn/farm"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// farmLogSize is FaRM's --log-size when none is given.
const farmLogSize = "1MiB"

// errTxnFlag is wrapped by every refusal of a txn command's flags.
var errTxnFlag = errors.New("txn: bad flag")

// The protocols a txn command speaks, by their --protocol name.
const (
	protoFarm    = "farm"
	protoPrismTX = "prism-tx"
	protoFord    = "ford"
)

// checkProtocol returns an error wrapping errTxnFlag unless p names a
// protocol.
func checkProtocol(p string) error {
	if p != protoFarm && p != protoPrismTX && p != protoFord {
		return fmt.Errorf("%w: --protocol %q: want farm, prism-tx or ford", errTxnFlag, p)
	}
	return nil
}

// checkClientProtocol is checkProtocol for client commands, which also
// speak smart-dtx (to FORD's nodes).
func checkClientProtocol(p string) error {
	if p == protoSmartDTX {
		return nil
	}
	if err := checkProtocol(p); err != nil {
		return fmt.Errorf("%w: --protocol %q: want farm, prism-tx, ford or smart-dtx", errTxnFlag, p)
	}
	return nil
}

// parseMembers parses --members: distinct host:port addresses, comma
// separated; nil when s is empty.
func parseMembers(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	members := strings.Split(s, ",")
	seen := map[string]bool{}
	for _, m := range members {
		if _, port, err := net.SplitHostPort(m); err != nil || port == "" || seen[m] {
			return nil, fmt.Errorf("%w: --members: %q is not a distinct host:port", errTxnFlag, m)
		}
		seen[m] = true
	}
	return members, nil
}

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Distributed transactions on remote memory: serve a memory node, benchmark FaRM, PRISM-TX and FORD, recover FORD",
		Long: `A transactional database is records sharded over memory nodes by a hash of their
key (at least three nodes); every node of one database serves one protocol:

  rdmakit txn serve --protocol prism-tx --listen 127.0.0.1:7491 &
  rdmakit txn serve --protocol prism-tx --listen 127.0.0.1:7492 &
  rdmakit txn serve --protocol prism-tx --listen 127.0.0.1:7493 &
  rdmakit txn bench --protocol prism-tx --nodes 127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493 \
      --workload smallbank --load --check

farm is FaRM (lock, validate, commit to backups, commit to primaries; each
shard on a primary and --backups backups); prism-tx is PRISM-TX (timestamps,
validation by enhanced CAS, installation by ALLOCATE and a greater-than CAS:
no node CPU per transaction; one copy per shard); ford is FORD (every step
one-sided on plain memory nodes: hitchhiked locking, validation, a redo log
on the coordinator's log node, coalescent commit to the primary and
--backups backups; give the nodes and the clients the same layout flags).
A dead FORD client's locks are recovered by the clients that meet them, or
by 'txn recover'. The data lives only in the nodes' memory: a node that
restarts comes back empty. See docs/txn.md.`,
	}
	cmd.AddCommand(newTxnServeCmd(), newTxnBenchCmd(), newTxnClientCmd(), newTxnRecoverCmd())
	return cmd
}

// txnServeFlags are `txn serve`'s flags.
type txnServeFlags struct {
	protocol, device, listen, metrics string
	token                             tokenFlags
	probe                             time.Duration
	maxConns                          int
	// FaRM
	coordinators int
	logSize      string
	lease        time.Duration
	members      string
	// FORD failover: this node's index in members; how long the
	// membership's leader waits for a silent node.
	self    int
	silence time.Duration
	// PRISM-TX
	slots  int
	memory string
	// FORD (with coordinators, and logSize: FORD's default when empty)
	backups, buckets, valueSize int
}

// service returns the memnode service of f's protocol (nil for FORD,
// whose nodes serve plain memory: memory bytes of it), and what it is.
func (f *txnServeFlags) service(tok string) (svc memnode.NewServiceFunc, memory int64, what string, err error) {
	if err := checkProtocol(f.protocol); err != nil {
		return nil, 0, "", err
	}
	if f.protocol == protoFord {
		l, err := f.fordLayout(0)
		if err != nil {
			return nil, 0, "", err
		}
		return nil, l.NodeBytes(), fmt.Sprintf("a FORD memory node (%d bytes: %d buckets per copy, %d copies)", l.NodeBytes(), l.Buckets, l.F+1), nil
	}
	svc, what, err = f.serviceOf(tok)
	return svc, 0, what, err
}

// fordLayout is a FORD node's layout, as its flags give it, for nodes
// nodes (0: not known).
func (f *txnServeFlags) fordLayout(nodes int) (ford.Layout, error) {
	sh := fordShape{backups: f.backups, buckets: f.buckets, valueSize: f.valueSize, coordinators: f.coordinators, logSize: fordLogSize}
	if f.logSize != "" {
		sh.logSize = f.logSize
	}
	return sh.layout(nodes)
}

// fordMembers parses a FORD node's --members and --self: nil without
// --members.
func (f *txnServeFlags) fordMembers() ([]string, error) {
	members, err := parseMembers(f.members)
	switch {
	case err != nil:
		return nil, err
	case members == nil:
		if f.self >= 0 {
			return nil, fmt.Errorf("%w: --self %d without --members", errTxnFlag, f.self)
		}
		return nil, nil
	case len(members) < 2:
		return nil, fmt.Errorf("%w: --members: %d address for a database of at least 2 nodes", errTxnFlag, len(members))
	case f.self < 0 || f.self >= len(members):
		return nil, fmt.Errorf("%w: --self %d: want this node's index in --members, 0 to %d", errTxnFlag, f.self, len(members)-1)
	case f.silence < 0:
		return nil, fmt.Errorf("%w: --silence %v: must not be negative", errTxnFlag, f.silence)
	}
	return members, nil
}

// serviceOf returns the memnode service of FaRM and PRISM-TX.
func (f *txnServeFlags) serviceOf(tok string) (memnode.NewServiceFunc, string, error) {
	if f.protocol == protoFarm {
		if f.logSize == "" {
			f.logSize = farmLogSize
		}
		logSize, err := parseBytes(f.logSize)
		if err != nil {
			return nil, "", fmt.Errorf("%w: --log-size: %w", errTxnFlag, err)
		}
		switch {
		case f.coordinators <= 0:
			return nil, "", fmt.Errorf("%w: --coordinators %d: want at least 1", errTxnFlag, f.coordinators)
		case f.lease <= 0 || f.lease > time.Minute:
			return nil, "", fmt.Errorf("%w: --lease %v: want above 0, at most 1m", errTxnFlag, f.lease)
		case logSize%8 != 0 || logSize < 4*farm.DefaultMaxMessage || logSize > 1<<30:
			return nil, "", fmt.Errorf("%w: --log-size %s: want a multiple of 8 from %d KiB to 1 GiB", errTxnFlag, f.logSize, 4*farm.DefaultMaxMessage>>10)
		}
		members, err := parseMembers(f.members)
		if err != nil {
			return nil, "", err
		}
		cfg := farm.NodeConfig{MaxClients: f.coordinators, LogSize: int(logSize), Lease: f.lease, Token: tok, Logger: slog.Default(), Members: members}
		return farm.Service(cfg, nil), "a FaRM memory node", nil
	}
	mem, err := parseBytes(f.memory)
	if err != nil {
		return nil, "", fmt.Errorf("%w: --memory: %w", errTxnFlag, err)
	}
	if f.slots <= 0 || f.slots > 1<<26 {
		return nil, "", fmt.Errorf("%w: --slots %d: want 1 to %d", errTxnFlag, f.slots, 1<<26)
	}
	if mem < 1<<20 || mem > 1<<36 {
		return nil, "", fmt.Errorf("%w: --memory %s: want 1 MiB to 64 GiB", errTxnFlag, f.memory)
	}
	return prismtx.Service(prismtx.NodeConfig{Slots: f.slots, Memory: int(mem)}, nil), "a PRISM-TX memory node", nil
}

func newTxnServeCmd() *cobra.Command {
	var f txnServeFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve one memory node of a transactional database until interrupted",
		Long: `serve holds one shard of a database (FaRM: its primary copy and --backups
backup copies of others, laid out by the first 'txn bench --load' or client
that creates the database; PRISM-TX: --slots records and --memory bytes of
versions; FORD: one plain memory region of the size the layout flags
--backups, --buckets, --value-size, --coordinators and --log-size ask for,
the same flags every client is given — the node's CPU does nothing per
transaction) in the memory of a verbs device (--device), for the clients that
connect through the connection manager at --listen, until SIGINT or SIGTERM.
A client must present the token (--token, --token-file or $RDMAKIT_TOKEN) when
the node has one; FaRM nodes present it to each other too, when they recover
the transactions of a client that died (after --lease). --listen also takes
tcp://HOST:PORT.

FaRM primary failover: give every node the same --members list, each node's
membership address (host:port, TCP) in the layout's order (node i of the
database at position i). The nodes then hold the database's configuration
(epoch, primary and backups per shard) in a raft group among themselves;
when a node falls silent for the lease, its shards' first backups take over
and clients follow the new epoch (docs/txn.md).

FORD failover: give every node the same --members and each its --self (its
index, the shard it is primary of). The nodes run the same membership; when
one falls silent for --silence, the others take it out and each of its shards
is served by its first backup. FORD's clients (ford, smart-dtx) are given
--members too: they read the configuration from the membership, route every
transaction by it, and use a new epoch only once every lease on the old one
has run out (fencing by configuration leases; docs/txn.md).`,
		Example: `  rdmakit txn serve --protocol farm --listen 127.0.0.1:7491
  rdmakit txn serve --protocol prism-tx --listen 127.0.0.1:7491 --slots 262144 --memory 256MiB
  rdmakit txn serve --protocol ford --listen 127.0.0.1:7491 --buckets 262144 --token-file tok
  rdmakit txn serve --protocol ford --listen 127.0.0.1:7491 --members 127.0.0.1:7591,127.0.0.1:7592,127.0.0.1:7593 --self 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			tok, err := f.token.value()
			if err != nil {
				return err
			}
			svc, memory, what, err := f.service(tok)
			if err != nil {
				return err
			}
			if f.maxConns <= 0 {
				return fmt.Errorf("%w: --max-conns %d: want at least 1", errTxnFlag, f.maxConns)
			}
			probe := f.probe
			if probe < 0 {
				return fmt.Errorf("%w: --probe %v: must not be negative", errTxnFlag, probe)
			} else if probe == 0 {
				probe = -1 // disabled
			}
			var fordMembers []string
			if f.protocol == protoFord {
				if fordMembers, err = f.fordMembers(); err != nil {
					return err
				}
			}
			listen := strings.TrimPrefix(f.listen, "tcp://")
			device := f.device
			if device == "" {
				host, _, ok := strings.Cut(listen, ":")
				if !ok || host == "" {
					host = "127.0.0.1"
				}
				device = "tcp://" + host + ":0"
			}
			mc := memnode.Config{Device: device, CM: listen, Metrics: f.metrics, Token: tok, Probe: probe,
				MaxClients: f.maxConns, NewService: svc, Memory: memory, Logger: slog.Default()}
			if fordMembers != nil {
				return f.serveFordNode(ctx, cmd.OutOrStdout(), mc, fordMembers, what)
			}
			srv, err := memnode.Start(ctx, mc)
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
	fl.StringVar(&f.protocol, "protocol", "", "the database's protocol: farm, prism-tx or ford (required)")
	fl.StringVar(&f.device, "device", "", "verbs device the node's memory is reached through (default tcp://<--listen host>:0)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7490", "connection manager address clients dial (host:port or tcp://host:port)")
	fl.StringVar(&f.metrics, "metrics", "", "HTTP listen address for Prometheus /metrics; empty disables")
	fl.DurationVar(&f.probe, "probe", memnode.DefaultProbe, "how often each client is checked (a 0-byte READ); a gone client's QP, CQ and goroutine are freed. 0 disables")
	fl.IntVar(&f.maxConns, "max-conns", memnode.DefaultMaxClients, "connections served at once (clients and, for FaRM, the other nodes); more are refused")
	fl.IntVar(&f.coordinators, "coordinators", farm.DefaultMaxClients, "farm: clients (coordinators) with a log ring here at once; ford: coordinator ids (open transactions) with a log area here")
	fl.StringVar(&f.logSize, "log-size", "", "farm: bytes of each coordinator's log ring (empty: "+farmLogSize+"); ford: of each coordinator's log area (empty: "+fordLogSize+")")
	fl.DurationVar(&f.lease, "lease", farm.DefaultLease, "farm: how long a transaction may hold a lock before the node recovers it")
	fl.StringVar(&f.members, "members", "", "farm and ford: the nodes' membership addresses (host:port,…) in layout order: primary failover by raft among them; empty: none")
	fl.IntVar(&f.self, "self", -1, "ford, with --members: this node's index in --members (its shard)")
	fl.DurationVar(&f.silence, "silence", 0, "ford, with --members: how long the membership waits for a silent node before it takes it out (0: 500ms)")
	fl.IntVar(&f.slots, "slots", 1<<18, "prism-tx: record slots of the shard (the most keys it holds; keep it about twice the keys)")
	fl.StringVar(&f.memory, "memory", "256MiB", "prism-tx: bytes of record versions")
	fl.IntVar(&f.backups, "backups", 1, "ford: backup copies of each shard (the clients' --backups)")
	fl.IntVar(&f.buckets, "buckets", 0, fmt.Sprintf("ford: record slots of each shard's copy (the clients' --buckets; default %d)", fordBuckets))
	fl.IntVar(&f.valueSize, "value-size", 64, "ford: the largest value a record holds (the clients' --value-size)")
	f.token.add(fl, "auth token clients must present (also passed to the device as token=)")
	return cmd
}
