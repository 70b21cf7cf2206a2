package farm_test

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/txn"
)

// BenchmarkTransfer measures a two-account read-modify-write transaction
// over three loop nodes from one goroutine, and reports its round trips.
func BenchmarkTransfer(b *testing.B) {
	bd := newBed(b, 3, 0)
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
	inDoubt := 0
	for i := range b.N {
		a, c := acct(i%accounts), acct((i*7+1)%accounts)
		err := txn.Run(ctx, db, func(tx txn.Tx) error { return transfer(tx, a, c, 1) })
		switch {
		case errors.Is(err, txn.ErrUnreachable): // a commit slower than the lease on a loaded machine
			inDoubt++
		case err != nil:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := db.Stats()
	n := float64(st.Commits - before.Commits)
	b.ReportMetric(float64(st.RoundTrips()-before.RoundTrips())/n, "trips/txn")
	b.ReportMetric(float64(st.RPCs-before.RPCs)/n, "rpcs/txn")
	b.ReportMetric(float64(inDoubt), "in-doubt")
}
