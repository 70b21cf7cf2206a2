package txnexp

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
)

// maxClients is the most client goroutines a point runs: PostgreSQL's
// pool opens one connection each.
const maxClients = 32

// startPostgres starts PostgreSQL 15 for the run (peers.StartPostgres: a
// fresh cluster in a temporary directory, fsync and synchronous_commit
// off, a unix socket only) and opens a connection per client.
func startPostgres(ctx context.Context, _ *bench.Env, _ dbSize) (*deployment, error) {
	pg, err := peers.StartPostgres(ctx, peers.PostgresOptions{})
	if err != nil {
		return nil, err
	}
	p, err := peers.OpenPGTxn(ctx, pg.ConnString, maxClients)
	if err != nil {
		pg.Stop()
		return nil, fmt.Errorf("PostgreSQL: connect: %w", err)
	}
	return &deployment{
		transport: "SQL, unix socket",
		pids:      pg.Pids,
		pg:        p,
		stop: func() {
			p.Close()
			pg.Stop()
		},
	}, nil
}
