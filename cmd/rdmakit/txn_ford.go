package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/memnode"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// fordBuckets is FORD's --buckets when none is given, on the nodes and
// on the clients alike: unlike FaRM's, FORD's nodes size their region
// before any client says how many records it loads, so the default is
// fixed — slots for the standard SmallBank (300,000 records over three
// shards, tables at most about half full).
const fordBuckets = 1 << 18

// fordShape is what FORD's layout is made of, as flags give it: every
// node (`txn serve`) and every client must be given the same values, or
// the client is refused (ford.ErrLayout).
type fordShape struct {
	backups, buckets, valueSize, coordinators int
	logSize                                   string
}

// layout is the shape as a ford.Layout, checked for nodes nodes (0: the
// node count is not known here — a server's).
func (s fordShape) layout(nodes int) (ford.Layout, error) {
	logSize, err := parseBytes(s.logSize)
	if err != nil {
		return ford.Layout{}, fmt.Errorf("%w: --log-size: %w", errTxnFlag, err)
	}
	buckets := s.buckets
	if buckets == 0 {
		buckets = fordBuckets
	}
	switch {
	case s.backups < 1 || nodes > 0 && s.backups >= nodes:
		// (ford reads F 0 as its default, 1: a shard always has a backup.)
		return ford.Layout{}, fmt.Errorf("%w: --backups %d: want at least 1 and fewer than the nodes", errTxnFlag, s.backups)
	case buckets < ford.MaxProbe || buckets > 1<<24:
		return ford.Layout{}, fmt.Errorf("%w: --buckets %d: want %d to %d", errTxnFlag, buckets, ford.MaxProbe, 1<<24)
	case s.valueSize < 1 || s.valueSize > txn.MaxValue:
		return ford.Layout{}, fmt.Errorf("%w: --value-size %d: want 1 to %d", errTxnFlag, s.valueSize, txn.MaxValue)
	case s.coordinators < 1 || s.coordinators > 4096:
		return ford.Layout{}, fmt.Errorf("%w: --coordinators %d: want 1 to 4096", errTxnFlag, s.coordinators)
	case logSize%64 != 0 || logSize < 1<<10 || logSize > 1<<24:
		return ford.Layout{}, fmt.Errorf("%w: --log-size %s: want a multiple of 64 from 1 KiB to 16 MiB", errTxnFlag, s.logSize)
	}
	return ford.Layout{F: s.backups, Buckets: buckets, ValueSize: s.valueSize, Coordinators: s.coordinators, LogSize: int(logSize)}, nil
}

// The defaults of FORD's --coordinators and --log-size (`txn serve`'s
// --coordinators default, FaRM's, is the same number; its --log-size,
// empty, means this for FORD).
const (
	fordCoordinators = ford.DefaultCoordinators
	fordLogSize      = "32KiB"
)

// fordStep parses a step's name (ford.Step.String).
func fordStep(name string) (ford.Step, error) {
	for _, s := range ford.Steps {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: step %q: want one of %v", errTxnFlag, name, ford.Steps)
}

// fordFlags are the client flags only FORD reads.
type fordFlags struct {
	coordinators int
	logSize      string
	backupReads  bool
	lease        time.Duration
	// members are the nodes' membership addresses (--members), empty
	// without failover.
	members string
	// hook is Config.Hook (set by `txn client --die-at`, not a flag).
	hook func(ford.Step) bool
}

// serveFordNode serves a FORD memory node that takes part in the
// database's membership (ford.StartNode) until ctx ends: mc is its
// memory server, members every node's membership address.
func (f *txnServeFlags) serveFordNode(ctx context.Context, out io.Writer, mc memnode.Config, members []string, what string) error {
	l, err := f.fordLayout(len(members))
	if err != nil {
		return err
	}
	nd, err := ford.StartNode(ctx, ford.NodeConfig{Server: mc, Layout: l, Self: f.self, Members: members, Silence: f.silence, Logger: slog.Default()})
	if err != nil {
		return err
	}
	info := nd.Server().Info()
	fmt.Fprintf(out, "serving %s: connect to %s (verbs device %s); member %d of the membership at %s\n", what, info.CM, info.Device, f.self, members[f.self])
	if info.Metrics != "" {
		fmt.Fprintf(out, "metrics at %s\n", info.Metrics)
	}
	<-ctx.Done()
	return nd.Close()
}

// printConfiguration prints the configuration a FORD client with
// --members ended the run under.
func printConfiguration(w io.Writer, c ford.Configuration) {
	var out []int
	for n, o := range c.Out {
		if o {
			out = append(out, n)
		}
	}
	fmt.Fprintf(w, "configuration epoch %d: primaries %v, backups %v, nodes out %v\n", c.Epoch, c.Primaries, c.Backups, out)
}
