package farm_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// TestConformance runs the txn conformance suite on three nodes, one
// backup per shard.
func TestConformance(t *testing.T) {
	txntest.Run(t, func(t *testing.T) txn.DB {
		b := newBed(t, 3, 0)
		b.layout.ValueSize = txn.MaxValue
		b.layout.Buckets = 1 << 14
		return b.db()
	})
}
