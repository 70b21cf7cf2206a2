package ford_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
	"github.com/rdmakit/rdmakit/txn/txntest"
)

// smartBed is a bed whose clients are Smart-DTX with techniques on.
func smartBed(t testing.TB, n int, layout ford.Layout, techniques ford.Technique) *bed {
	b := newBed(t, n, layout)
	b.smart = &ford.SmartConfig{Workers: 2, Tasks: 4, Techniques: techniques}
	return b
}

// TestSmartConformance runs the txn conformance suite on Smart-DTX.
func TestSmartConformance(t *testing.T) {
	txntest.Run(t, func(t *testing.T) txn.DB {
		return smartBed(t, 3, ford.Layout{Buckets: 2048, Coordinators: 16}, ford.AllTechniques).db()
	})
}
