package workload_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/rdmakit/rdmakit/txn/txntest"
	"github.com/rdmakit/rdmakit/workload"
)

// BenchmarkSmallBankExec: one SmallBank transaction drawn and run on a
// MemDB (the workload's own cost plus MemDB's; -benchmem shows the
// allocations).
func BenchmarkSmallBankExec(b *testing.B) {
	ctx := context.Background()
	sb := &workload.SmallBank{Accounts: 10_000}
	db := txntest.NewMemDB()
	if err := sb.Load(ctx, db, workload.TxnLoad{}); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sb.Exec(ctx, db, sb.Next(r)); err != nil && !errors.Is(err, workload.ErrRejected) {
			b.Fatal(err)
		}
	}
}

// BenchmarkYCSBTNext: drawing a zipf 0.99 YCSB-T transaction allocates
// nothing.
func BenchmarkYCSBTNext(b *testing.B) {
	y := &workload.YCSBT{Keys: 100_000, Zipf: 0.99}
	r := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	for b.Loop() {
		_ = y.Next(r)
	}
}
