package prismtx_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/prismtx"
)

// BenchmarkRMW: one client, read-modify-write transactions of two keys
// drawn uniformly from 10,000, on three nodes over tcp in this process
// (round trips per transaction reported).
func BenchmarkRMW(b *testing.B) {
	var addrs []string
	for range 3 {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			NewService: prismtx.Service(prismtx.NodeConfig{Slots: 1 << 15, Memory: 32 << 20}, nil), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Close() })
		addrs = append(addrs, srv.Info().CM)
	}
	ctx := context.Background()
	db, err := prismtx.Dial(ctx, prismtx.Config{Device: "tcp://127.0.0.1:0", Nodes: addrs})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const keys = 10000
	key := func(i int) []byte { return []byte(fmt.Sprintf("user%d", i)) }
	for i := 0; i < keys; i += 100 {
		err := txn.Run(ctx, db, func(tx txn.Tx) error {
			for j := i; j < i+100; j++ {
				if err := tx.Put(key(j), make([]byte, 56)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	s0 := db.Stats()
	b.ResetTimer()
	for range b.N {
		err := txn.Run(ctx, db, func(tx txn.Tx) error {
			for range 2 {
				k := key(rand.N(keys))
				v, err := tx.Get(k)
				if err != nil {
					return err
				}
				v[0]++
				if err := tx.Put(k, v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	s := db.Stats()
	b.ReportMetric(float64(s.RoundTrips-s0.RoundTrips)/float64(s.Commits-s0.Commits), "trips/txn")
}
