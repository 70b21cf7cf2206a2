package rsexp

import (
	"context"
	"errors"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/blockstore"
)

// system is a block store rs-ycsb measures: the name of its rows and how
// to bring up its replicas.
type system struct {
	name string
	// start brings up v.replicas replicas holding a volume of v's block
	// size and count, and returns how to reach them. An error for which
	// skippable is true leaves the system out of the run, its reason in
	// the notes; any other error ends the run.
	start func(ctx context.Context, env *bench.Env, v volume) (*deployment, error)
}

// volume is the shape of the volume every system serves.
type volume struct {
	replicas  int
	blockSize int
	blocks    uint64
}

// deployment is a started system.
type deployment struct {
	// transport says how the clients reach the replicas, for the table
	// (e.g. "gRPC, tcp").
	transport string
	// pids are the replicas' processes: their CPU time, from
	// /proc/PID/stat, is the replica CPU per operation.
	pids []int
	// open connects a new client of the volume. rs-ycsb opens one per
	// client goroutine. A client that implements roundTripper has its
	// round trips per operation reported.
	open func(ctx context.Context) (blockstore.Store, error)
	// stop ends the replicas and removes what they left behind. It is
	// called once, after every client is closed, also when the run
	// fails.
	stop func()
}

// roundTripper is a client that counts its requests: one per replica a
// phase is sent to (PRISM-RS, ABD over RPC), one per gRPC request
// (etcd).
type roundTripper interface {
	RoundTrips() uint64
}

// systems are the block stores rs-ycsb compares, in the order of its
// rows. etcd comes first: the other rows' ratios are against it.
var systems = []system{
	{name: "etcd", start: startEtcd},
	{name: "PRISM-RS", start: startPRISMRS},
	{name: "ABD over RPC", start: startABDRPC},
}

// errUnavailable is wrapped by a system's start when the system cannot
// run on this machine (a missing program, a missing facility): the run
// goes on without it.
var errUnavailable = errors.New("rs-ycsb: system unavailable")

// skippable reports whether a system's start failed because the system
// cannot run here, rather than because it broke.
func skippable(err error) bool {
	return errors.Is(err, errUnavailable) || errors.Is(err, peers.ErrNotInstalled) ||
		errors.Is(err, peers.ErrNoTmpfs) || errors.Is(err, bench.ErrNoCommand)
}
