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

// design is how a deployment of one of rdmakit's designs creates its
// volume and opens a client, on the device every client shares, given
// the replicas' addresses and token.
type design struct {
	create func(ctx context.Context, dev verbs.Device, addrs []string, token string, v volume) error
	open   func(ctx context.Context, dev verbs.Device, addrs []string, token string) (blockstore.Store, error)
}

// startDesign deploys d: v.replicas `rdmakit rs replica` processes over
// tcp, one client device in this process, the volume created.
func startDesign(ctx context.Context, env *bench.Env, v volume, name string, d design) (*deployment, error) {
	rs, err := startReplicas(ctx, env, v)
	if err != nil {
		return nil, err
	}
	dev, err := verbs.Open(clientDevice + rs.token)
	if err != nil {
		rs.stop()
		return nil, err
	}
	if err := d.create(ctx, dev, rs.addrs(), rs.token, v); err != nil {
		dev.Close()
		rs.stop()
		return nil, fmt.Errorf("%s: create the volume: %w", name, err)
	}
	return &deployment{
		transport: "tcp",
		pids:      rs.pids(),
		open:      func(ctx context.Context) (blockstore.Store, error) { return d.open(ctx, dev, rs.addrs(), rs.token) },
		stop:      func() { dev.Close(); rs.stop() },
	}, nil
}

// startPRISMRS deploys PRISM-RS, the volume created by a prismrs client.
func startPRISMRS(ctx context.Context, env *bench.Env, v volume) (*deployment, error) {
	return startDesign(ctx, env, v, "PRISM-RS", design{
		create: func(ctx context.Context, dev verbs.Device, addrs []string, token string, v volume) error {
			c, err := prismrs.Create(ctx, prismrs.Config{Dev: dev, Replicas: addrs, Token: token}, v.blockSize, v.blocks)
			if err != nil {
				return err
			}
			return c.Close()
		},
		open: func(ctx context.Context, dev verbs.Device, addrs []string, token string) (blockstore.Store, error) {
			return prismrs.Dial(ctx, prismrs.Config{Dev: dev, Replicas: addrs, Token: token})
		},
	})
}

// startABDRPC deploys ABD over RPC on the same replica program, the
// volume created and used through the replicas' RPCs.
func startABDRPC(ctx context.Context, env *bench.Env, v volume) (*deployment, error) {
	return startDesign(ctx, env, v, "ABD over RPC", design{
		create: func(ctx context.Context, dev verbs.Device, addrs []string, token string, v volume) error {
			return abdrpc.Create(ctx, abdrpc.Config{Dev: dev, Replicas: addrs, Token: token}, blockstore.Layout{BlockSize: v.blockSize, Blocks: v.blocks})
		},
		open: func(ctx context.Context, dev verbs.Device, addrs []string, token string) (blockstore.Store, error) {
			return abdrpc.Dial(ctx, abdrpc.Config{Dev: dev, Replicas: addrs, Token: token})
		},
	})
}
