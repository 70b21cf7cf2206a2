package main

import (
	"fmt"
	"time"

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
	// hook is Config.Hook (set by `txn client --die-at`, not a flag).
	hook func(ford.Step) bool
}
