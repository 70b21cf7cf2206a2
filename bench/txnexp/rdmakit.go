package txnexp

import (
	"context"
	"fmt"
	"strconv"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
	"github.com/rdmakit/rdmakit/txn/prismtx"
	"github.com/rdmakit/rdmakit/verbs"
)

// nodes is the memory nodes of every rdmakit database: records are
// sharded over them.
const nodes = 3

// nodeDevice is the tcp device of the memory nodes: the soft NIC parks
// instead of polling when idle (spin=0s), as the block store's replicas
// do, so a node's CPU per transaction is the work the transaction made it
// do.
const nodeDevice = "tcp://127.0.0.1:0?spin=0s"

// clientDevice is the device of a system's client; the nodes' token goes
// in its query (the nodes' devices present it when they connect back).
const clientDevice = "tcp://127.0.0.1:0?spin=0s&token="

// startNodes starts `rdmakit txn serve --protocol protocol` nodes times,
// each its own process, with one random token and the extra flags.
func startNodes(ctx context.Context, env *bench.Env, protocol string, extra ...string) ([]*bench.Server, string, error) {
	tok, err := bench.NewToken()
	if err != nil {
		return nil, "", err
	}
	var servers []*bench.Server
	for range nodes {
		args := append([]string{"txn", "serve", "--protocol", protocol, "--listen", "127.0.0.1:0", "--device", nodeDevice, "--metrics", ""}, extra...)
		s, err := bench.StartServer(ctx, env, tok, args...)
		if err != nil {
			stopServers(servers)
			return nil, "", err
		}
		servers = append(servers, s)
	}
	return servers, tok, nil
}

func stopServers(ss []*bench.Server) {
	for _, s := range ss {
		s.Stop()
	}
}

func addrs(ss []*bench.Server) []string {
	a := make([]string, len(ss))
	for i, s := range ss {
		a[i] = s.Addr
	}
	return a
}

func pids(ss []*bench.Server) []int {
	p := make([]int, len(ss))
	for i, s := range ss {
		p[i] = s.Pid()
	}
	return p
}

// perShard is a shard's share of size's records, doubled (hash tables
// at most half full) and rounded up to a power of two.
func perShard(size dbSize) int {
	n := 1024
	for n < 2*size.records/nodes {
		n *= 2
	}
	return n
}

// deploy wraps started nodes and a client into a deployment.
func deploy(ss []*bench.Server, dev verbs.Device, db txn.DB, counters func() (uint64, uint64)) *deployment {
	return &deployment{
		transport: "tcp",
		pids:      func() []int { return pids(ss) },
		db:        db,
		counters:  counters,
		stop: func() {
			db.Close()
			dev.Close()
			stopServers(ss)
		},
	}
}

// startFaRM deploys FaRM: three nodes, each shard with one backup, the
// database created by the client, laid out for size.
func startFaRM(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
	ss, tok, err := startNodes(ctx, env, "farm")
	if err != nil {
		return nil, err
	}
	dev, err := verbs.Open(clientDevice + tok)
	if err != nil {
		stopServers(ss)
		return nil, err
	}
	db, err := farm.Create(ctx, farm.Config{Dev: dev, Nodes: addrs(ss), Token: tok},
		farm.Layout{F: 1, Buckets: perShard(size), ValueSize: size.valueSize})
	if err != nil {
		dev.Close()
		stopServers(ss)
		return nil, fmt.Errorf("FaRM: create the database: %w", err)
	}
	return deploy(ss, dev, db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.RoundTrips() }), nil
}

// startPRISMTX deploys PRISM-TX: three nodes with slots for size.
func startPRISMTX(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
	slots := perShard(size)
	// Versions: every record's live one, as many replaced ones waiting
	// to be recycled, in size classes up to twice their bytes.
	mem := max(64<<20, 4*slots*(64+size.valueSize))
	ss, tok, err := startNodes(ctx, env, "prism-tx", "--slots", strconv.Itoa(slots), "--memory", strconv.Itoa(mem))
	if err != nil {
		return nil, err
	}
	dev, err := verbs.Open(clientDevice + tok)
	if err != nil {
		stopServers(ss)
		return nil, err
	}
	db, err := prismtx.Dial(ctx, prismtx.Config{Dev: dev, Nodes: addrs(ss), Token: tok})
	if err != nil {
		dev.Close()
		stopServers(ss)
		return nil, fmt.Errorf("PRISM-TX: connect: %w", err)
	}
	return deploy(ss, dev, db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.RoundTrips }), nil
}
