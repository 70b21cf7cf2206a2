package rsexp

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/verbs"
)

// replicaDevice is the tcp device of rs-ycsb's replicas: the soft NIC
// parks instead of polling when idle (spin=0s), as kv-peers' nodes do,
// so a replica's CPU per operation is the work the operation made it do.
const replicaDevice = "tcp://127.0.0.1:0?spin=0s"

// clientDevice is the device every client of a system shares, as the
// clients of one process share its NIC; the replicas' token goes in its
// query (the replicas' devices present it when they connect back).
const clientDevice = "tcp://127.0.0.1:0?spin=0s&token="

// replicaSet is v.replicas `rdmakit rs replica` processes.
type replicaSet struct {
	token   string // all of them require it: a client presents one token
	servers []*bench.Server
}

// startReplicas starts v.replicas replicas, each its own process, with
// one random token.
func startReplicas(ctx context.Context, env *bench.Env, v volume) (*replicaSet, error) {
	tok, err := bench.NewToken()
	if err != nil {
		return nil, err
	}
	rs := &replicaSet{token: tok}
	for range v.replicas {
		s, err := bench.StartServer(ctx, env, tok, "rs", "replica", "--listen", "127.0.0.1:0", "--device", replicaDevice, "--metrics", "")
		if err != nil {
			rs.stop()
			return nil, err
		}
		rs.servers = append(rs.servers, s)
	}
	return rs, nil
}

func (rs *replicaSet) addrs() []string {
	a := make([]string, len(rs.servers))
	for i, s := range rs.servers {
		a[i] = s.Addr
	}
	return a
}

func (rs *replicaSet) pids() []int {
	p := make([]int, len(rs.servers))
	for i, s := range rs.servers {
		p[i] = s.Pid()
	}
	return p
}

func (rs *replicaSet) stop() {
	for _, s := range rs.servers {
		s.Stop()
	}
}

// startPRISMRS deploys PRISM-RS: v.replicas replicas in their own
// processes over tcp, the volume created by a prismrs client.
func startPRISMRS(ctx context.Context, env *bench.Env, v volume) (*deployment, error) {
	rs, err := startReplicas(ctx, env, v)
	if err != nil {
		return nil, err
	}
	dev, err := verbs.Open(clientDevice + rs.token)
	if err != nil {
		rs.stop()
		return nil, err
	}
	cfg := func() prismrs.Config {
		return prismrs.Config{Dev: dev, Replicas: rs.addrs(), Token: rs.token}
	}
	c, err := prismrs.Create(ctx, cfg(), v.blockSize, v.blocks)
	if err != nil {
		dev.Close()
		rs.stop()
		return nil, fmt.Errorf("PRISM-RS: create the volume: %w", err)
	}
	c.Close()
	return &deployment{
		transport: "tcp",
		pids:      rs.pids(),
		open:      func(ctx context.Context) (blockstore.Store, error) { return prismrs.Dial(ctx, cfg()) },
		stop:      func() { dev.Close(); rs.stop() },
	}, nil
}

// startABDRPC deploys ABD over RPC: the same replica processes, the
// volume created and used through the replicas' RPCs.
func startABDRPC(ctx context.Context, env *bench.Env, v volume) (*deployment, error) {
	rs, err := startReplicas(ctx, env, v)
	if err != nil {
		return nil, err
	}
	dev, err := verbs.Open(clientDevice + rs.token)
	if err != nil {
		rs.stop()
		return nil, err
	}
	cfg := func() abdrpc.Config {
		return abdrpc.Config{Dev: dev, Replicas: rs.addrs(), Token: rs.token}
	}
	if err := abdrpc.Create(ctx, cfg(), blockstore.Layout{BlockSize: v.blockSize, Blocks: v.blocks}); err != nil {
		dev.Close()
		rs.stop()
		return nil, fmt.Errorf("ABD over RPC: create the volume: %w", err)
	}
	return &deployment{
		transport: "tcp",
		pids:      rs.pids(),
		open:      func(ctx context.Context) (blockstore.Store, error) { return abdrpc.Dial(ctx, cfg()) },
		stop:      func() { dev.Close(); rs.stop() },
	}, nil
}
