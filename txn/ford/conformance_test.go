package ford_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// TestConformance runs the txn conformance suite on three nodes, one
// backup per shard.
func TestConformance(t *testing.T) {
	txntest.Run(t, func(t *testing.T) txn.DB {
		return newBed(t, 3, ford.Layout{Buckets: 2048, Coordinators: 16}).db()
	})
}

// TestConformanceBackupReads runs it with reads from backups.
func TestConformanceBackupReads(t *testing.T) {
	txntest.Run(t, func(t *testing.T) txn.DB {
		b := newBed(t, 3, ford.Layout{Buckets: 2048, Coordinators: 16})
		cfg := b.config()
		cfg.BackupReads = true
		return b.dbWith(cfg)
	})
}
