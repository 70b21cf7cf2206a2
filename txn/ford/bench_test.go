package ford_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/txn"
)

// BenchmarkTransfer measures a two-account read-modify-write transaction
// over three loop nodes from one goroutine (as farm's BenchmarkTransfer),
// and reports its round trips: in all, and after execution.
func BenchmarkTransfer(b *testing.B) {
	bd := newBed(b, 3, smallLayout)
	db := bd.db()
	ctx := tctx(b)
	const accounts = 1000
	for i := 0; i < accounts; i += 10 {
		if err := txn.Run(ctx, db, func(tx txn.Tx) error {
			for j := i; j < i+10; j++ {
				if err := tx.Put(acct(j), []byte("100")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	before := db.Stats()
	b.ResetTimer()
	for i := range b.N {
		a, c := acct(i%accounts), acct((i*7+1)%accounts)
		if err := txn.Run(ctx, db, func(tx txn.Tx) error { return transfer(tx, a, c, 1) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := db.Stats()
	n := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(st.Rounds-before.Rounds)/n, "trips/txn")
	b.ReportMetric(float64(st.CommitRounds-before.CommitRounds)/n, "commit-trips/txn")
	b.ReportMetric(float64(st.Lists-before.Lists)/n, "lists/txn")
}
