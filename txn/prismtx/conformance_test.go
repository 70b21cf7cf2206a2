package prismtx_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// TestConformance runs the txn conformance suite (the serializability
// checker on SmallBank and TATP included) on three nodes.
func TestConformance(t *testing.T) {
	txntest.Run(t, func(t *testing.T) txn.DB {
		b := newBed(t, 3)
		return b.dial(b.config())
	})
}
