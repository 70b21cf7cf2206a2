package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// txnClientFlags are the flags of every txn client command: which
// nodes, which protocol, how to reach them.
type txnClientFlags struct {
	protocol, nodes, device string
	token                   tokenFlags
	timeout                 time.Duration
	// FaRM's layout, given to the nodes when the database is created;
	// FORD's, with ford's coordinators and logSize, on every open.
	backups, buckets, valueSize int
	ford                        fordFlags
	// smart is Smart-DTX's (`txn bench` adds its flags; elsewhere
	// smart-dtx runs with every technique on).
	smart smartFlags
}

func (f *txnClientFlags) add(cmd *cobra.Command) {
	f.smart = smartFlags{techniques: "all", tasks: defaultSmartTasks} // what addSmart's flags default to
	fl := cmd.Flags()
	fl.StringVar(&f.protocol, "protocol", "", "the nodes' protocol: farm, prism-tx, ford, or smart-dtx (FORD's nodes, Smart's runtime in the client) (required)")
	fl.StringVar(&f.nodes, "nodes", "", "the database's memory nodes: connection manager addresses, comma-separated, in shard order (required)")
	fl.StringVar(&f.device, "device", "tcp://127.0.0.1:0", "the client's own verbs device (the nodes must reach it)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the nodes when connecting")
	fl.IntVar(&f.backups, "backups", 1, "farm, with --load, and ford: backup copies of each shard (primary-backup replication)")
	fl.IntVar(&f.buckets, "buckets", 0, fmt.Sprintf("farm, with --load: object slots per shard (default: twice the workload's records per shard); ford: record slots of each shard's copy, as the nodes were given (default %d)", fordBuckets))
	fl.IntVar(&f.valueSize, "value-size", 64, "farm, with --load, and ford: the largest value a record holds")
	fl.IntVar(&f.ford.coordinators, "coordinators", fordCoordinators, "ford: coordinator ids with a log area per node, as the nodes were given")
	fl.StringVar(&f.ford.logSize, "log-size", fordLogSize, "ford: bytes of each coordinator's log area, as the nodes were given")
	fl.BoolVar(&f.ford.backupReads, "backup-reads", false, "ford: read records from a backup copy instead of the primary (validated at the primary)")
	fl.DurationVar(&f.ford.lease, "lease", ford.MaxLease, "ford: how long a transaction's locks are its own before any client may recover them (at most 1s)")
	fl.StringVar(&f.ford.members, "members", "", "ford: the nodes' membership addresses (host:port,…) as the nodes were given: route by the configuration they hold, follow a failover; empty: none")
	f.token.add(fl, "auth token the nodes require")
}

// list parses --nodes.
func (f *txnClientFlags) list() ([]string, error) {
	var ns []string
	seen := map[string]bool{}
	for _, n := range strings.Split(f.nodes, ",") {
		n = strings.TrimPrefix(strings.TrimSpace(n), "tcp://")
		if n == "" {
			continue
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: --nodes: %s listed twice", errTxnFlag, n)
		}
		seen[n] = true
		ns = append(ns, n)
	}
	if len(ns) == 0 {
		return nil, fmt.Errorf("%w: --nodes: give the memory nodes' addresses", errTxnFlag)
	}
	return ns, nil
}

// txnCounters reads a client's committed transactions and the round trips
// they took so far, as its protocol counts them.
type txnCounters func() (commits, trips uint64)

// open connects a client of f's database. With records > 0 and FaRM, it
// creates the database first, laid out for about records records.
func (f *txnClientFlags) open(ctx context.Context, records int) (txn.DB, txnCounters, error) {
	if err := checkClientProtocol(f.protocol); err != nil {
		return nil, nil, err
	}
	nodes, err := f.list()
	if err != nil {
		return nil, nil, err
	}
	tok, err := f.token.value()
	if err != nil {
		return nil, nil, err
	}
	device, err := withQuery(f.device, "token", tok)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if isFord(f.protocol) {
		db, err := f.openFord(ctx, device, nodes, tok)
		if err != nil {
			return nil, nil, err
		}
		return db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.Rounds }, nil
	}
	if f.protocol == protoPrismTX {
		db, err := prismtx.Dial(ctx, prismtx.Config{Device: device, Nodes: nodes, Token: tok})
		if err != nil {
			return nil, nil, err
		}
		return db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.RoundTrips }, nil
	}
	cfg := farm.Config{Device: device, Nodes: nodes, Token: tok}
	var db *farm.DB
	if records > 0 {
		l, lerr := f.layout(records, len(nodes))
		if lerr != nil {
			return nil, nil, lerr
		}
		db, err = farm.Create(ctx, cfg, l)
	} else {
		db, err = farm.Dial(ctx, cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	return db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.RoundTrips() }, nil
}

// layout is FaRM's layout for records records on n nodes: --buckets, or
// twice the records per shard rounded up to a power of two.
func (f *txnClientFlags) layout(records, n int) (farm.Layout, error) {
	if f.backups < 1 || f.backups >= n {
		return farm.Layout{}, fmt.Errorf("%w: --backups %d: want 1 to %d with %d nodes", errTxnFlag, f.backups, n-1, n)
	}
	if f.valueSize < 8 || f.valueSize > txn.MaxValue {
		return farm.Layout{}, fmt.Errorf("%w: --value-size %d: want 8 to %d", errTxnFlag, f.valueSize, txn.MaxValue)
	}
	buckets := f.buckets
	if buckets == 0 {
		buckets = 1024
		for buckets < 2*records/n {
			buckets *= 2
		}
	}
	if buckets < farm.MaxProbe || buckets > 1<<26 {
		return farm.Layout{}, fmt.Errorf("%w: --buckets %d: want %d to %d", errTxnFlag, buckets, farm.MaxProbe, 1<<26)
	}
	return farm.Layout{F: f.backups, Buckets: buckets, ValueSize: f.valueSize}, nil
}

// openFord connects a FORD client with f's layout (the first client
// formats the nodes' headers with it).
func (f *txnClientFlags) openFord(ctx context.Context, device string, nodes []string, tok string) (*ford.DB, error) {
	sh := fordShape{backups: f.backups, buckets: f.buckets, valueSize: f.valueSize, coordinators: f.ford.coordinators, logSize: f.ford.logSize}
	l, err := sh.layout(len(nodes))
	if err != nil {
		return nil, err
	}
	if f.ford.lease <= 0 || f.ford.lease > ford.MaxLease {
		return nil, fmt.Errorf("%w: --lease %v: want above 0, at most %v", errTxnFlag, f.ford.lease, ford.MaxLease)
	}
	members, err := parseMembers(f.ford.members)
	if err != nil {
		return nil, err
	}
	if members != nil && len(members) != len(nodes) {
		return nil, fmt.Errorf("%w: --members: %d addresses for %d nodes", errTxnFlag, len(members), len(nodes))
	}
	cfg := ford.Config{Device: device, Nodes: nodes, Token: tok, Layout: l, BackupReads: f.ford.backupReads,
		Lease: f.ford.lease, Hook: f.ford.hook, Members: members}
	if f.protocol == protoSmartDTX {
		if cfg.Smart, err = f.smart.config(); err != nil {
			return nil, err
		}
	}
	return ford.Dial(ctx, cfg)
}
