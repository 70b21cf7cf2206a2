package txnexp

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/txn/prismtx"
	"github.com/rdmakit/rdmakit/verbs"
)

// nodes is the memory nodes of every rdmakit database: records are
// sharded over them.
const nodes = 3

// The transports the memory nodes and their client use: tcp (the soft
// NIC over loopback sockets, as between hosts) and shm (one host's shared
// memory: READ, WRITE and the atomics run in the client's process). Their
// NIC goroutines park instead of polling when idle (spin=0s), as the
// block store's replicas do, so a node's CPU per transaction is the work
// the transaction made it do.
const (
	overTCP = "tcp"
	overSHM = "shm"
)

// shmSeq numbers the shm devices of the experiments' nodes and clients.
var shmSeq atomic.Int64

// devices returns the verbs device URIs of a deployment's nodes (one per
// node) and of its client, over transport. The nodes' token goes in the
// client's tcp device (the nodes' devices present it when they connect
// back); shm devices meet over abstract Unix sockets of this host.
func devices(transport, token string) (node []string, client string) {
	if transport == overSHM {
		base := fmt.Sprintf("shm://rdmakit-txn-%d-%d", os.Getpid(), shmSeq.Add(1))
		for i := range nodes {
			node = append(node, fmt.Sprintf("%s-node%d?spin=0s", base, i))
		}
		return node, base + "-client?spin=0s"
	}
	for range nodes {
		node = append(node, "tcp://127.0.0.1:0?spin=0s")
	}
	return node, "tcp://127.0.0.1:0?spin=0s&token=" + token
}

// startNodes starts `rdmakit txn serve --protocol protocol` nodes times,
// each its own process on transport, with one random token and the extra
// flags; it returns them, the token and the client's device URI.
func startNodes(ctx context.Context, env *bench.Env, protocol, transport string, extra ...string) ([]*bench.Server, string, string, error) {
	tok, err := bench.NewToken()
	if err != nil {
		return nil, "", "", err
	}
	nodeDevs, clientDev := devices(transport, tok)
	var servers []*bench.Server
	for _, dev := range nodeDevs {
		args := append([]string{"txn", "serve", "--protocol", protocol, "--listen", "127.0.0.1:0", "--device", dev, "--metrics", ""}, extra...)
		s, err := bench.StartServer(ctx, env, tok, args...)
		if err != nil {
			stopServers(servers)
			return nil, "", "", err
		}
		servers = append(servers, s)
	}
	return servers, tok, clientDev, nil
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

// deploy wraps started nodes and a client over transport into a
// deployment.
func deploy(transport string, ss []*bench.Server, dev verbs.Device, db txn.DB, counters func() (uint64, uint64)) *deployment {
	return &deployment{
		transport: transport,
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

// farmOn deploys FaRM over transport: three nodes, each shard with one
// backup, the database created by the client, laid out for size.
func farmOn(transport string) func(context.Context, *bench.Env, dbSize) (*deployment, error) {
	return func(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
		ss, tok, clientDev, err := startNodes(ctx, env, "farm", transport)
		if err != nil {
			return nil, err
		}
		dev, err := verbs.Open(clientDev)
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
		return deploy(transport, ss, dev, db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.RoundTrips() }), nil
	}
}

// prismTXOn deploys PRISM-TX over transport: three nodes with slots for
// size.
func prismTXOn(transport string) func(context.Context, *bench.Env, dbSize) (*deployment, error) {
	return func(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
		slots := perShard(size)
		// Versions: every record's live one, as many replaced ones
		// waiting to be recycled, in size classes up to twice their bytes.
		mem := max(64<<20, 4*slots*(64+size.valueSize))
		ss, tok, clientDev, err := startNodes(ctx, env, "prism-tx", transport, "--slots", strconv.Itoa(slots), "--memory", strconv.Itoa(mem))
		if err != nil {
			return nil, err
		}
		dev, err := verbs.Open(clientDev)
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
		return deploy(transport, ss, dev, db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.RoundTrips }), nil
	}
}

// fordOn deploys FORD over transport: three plain memory nodes (`txn
// serve --protocol ford`, a region sized for the layout), each shard
// with one backup, laid out for size; the client formats them.
func fordOn(transport string) func(context.Context, *bench.Env, dbSize) (*deployment, error) {
	return fordWith(transport, nil)
}

// smartDTXOn deploys Smart-DTX over transport: FORD's nodes, as fordOn
// starts them, and a client on Smart's runtime with every technique, its
// workers' tasks together as many as the most client goroutines of a
// point (maxClients).
func smartDTXOn(transport string) func(context.Context, *bench.Env, dbSize) (*deployment, error) {
	return fordWith(transport, &ford.SmartConfig{Techniques: ford.AllTechniques, Workers: smartWorkers, Tasks: maxClients / smartWorkers})
}

// fordWith deploys FORD over transport, its client on Smart's runtime
// when sc is not nil.
func fordWith(transport string, sc *ford.SmartConfig) func(context.Context, *bench.Env, dbSize) (*deployment, error) {
	return func(ctx context.Context, env *bench.Env, size dbSize) (*deployment, error) {
		l := ford.Layout{F: 1, Buckets: perShard(size), ValueSize: size.valueSize}
		ss, tok, clientDev, err := startNodes(ctx, env, "ford", transport, "--backups", strconv.Itoa(l.F),
			"--buckets", strconv.Itoa(l.Buckets), "--value-size", strconv.Itoa(l.ValueSize))
		if err != nil {
			return nil, err
		}
		dev, err := verbs.Open(clientDev)
		if err != nil {
			stopServers(ss)
			return nil, err
		}
		db, err := ford.Dial(ctx, ford.Config{Dev: dev, Nodes: addrs(ss), Token: tok, Layout: l, Smart: sc})
		if err != nil {
			dev.Close()
			stopServers(ss)
			return nil, fmt.Errorf("FORD: connect: %w", err)
		}
		d := deploy(transport, ss, dev, db, func() (uint64, uint64) { s := db.Stats(); return s.Commits, s.Rounds })
		d.commitTrips = func() (uint64, uint64, uint64) {
			s := db.Stats()
			return s.CommitRounds, s.ReadWrite, s.MaxCommitRounds
		}
		return d, nil
	}
}
