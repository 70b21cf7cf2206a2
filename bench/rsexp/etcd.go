package rsexp

import (
	"context"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/blockstore"
)

// etcdPrefix is the key prefix of rs-ycsb's volume on its etcd cluster.
const etcdPrefix = "rs-ycsb"

// startEtcd starts a cluster of v.replicas etcd members on loopback
// (peers.StartEtcd: data on tmpfs, --unsafe-no-fsync) and creates the
// volume on it; its clients are peers.EtcdBlocks.
func startEtcd(ctx context.Context, _ *bench.Env, v volume) (*deployment, error) {
	e, err := peers.StartEtcd(ctx, v.replicas)
	if err != nil {
		return nil, err
	}
	s, err := peers.CreateEtcdBlocks(ctx, e.Endpoints, etcdPrefix, v.blockSize, v.blocks)
	if err != nil {
		e.Stop()
		return nil, err
	}
	s.Close()
	return &deployment{
		transport: "gRPC, tcp",
		pids:      e.Pids(),
		open: func(ctx context.Context) (blockstore.Store, error) {
			return peers.OpenEtcdBlocks(ctx, e.Endpoints, etcdPrefix)
		},
		stop: e.Stop,
	}, nil
}
