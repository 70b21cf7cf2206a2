package farm_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/farm"
)

// Three memory nodes serve a FaRM database (one backup per shard); a
// client moves money between two accounts in a transaction.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var nodes []string
	for i := range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: fmt.Sprintf("loop://farm-example/n%d", i),
			NewService: farm.Service(farm.NodeConfig{}, nil), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			panic(err)
		}
		defer srv.Close()
		nodes = append(nodes, srv.Info().CM)
	}
	db, err := farm.Create(ctx, farm.Config{Device: "loop://farm-example/client", Nodes: nodes},
		farm.Layout{Buckets: 1024, ValueSize: 64})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	err = txn.Run(ctx, db, func(tx txn.Tx) error {
		if err := tx.Put([]byte("alice"), []byte("70")); err != nil {
			return err
		}
		return tx.Put([]byte("bob"), []byte("30"))
	})
	if err != nil {
		panic(err)
	}
	var alice, bob []byte
	err = txn.Run(ctx, db, func(tx txn.Tx) error {
		if alice, err = tx.Get([]byte("alice")); err != nil {
			return err
		}
		bob, err = tx.Get([]byte("bob"))
		return err
	})
	fmt.Printf("alice %s, bob %s, %v\n", alice, bob, err)
	// Output: alice 70, bob 30, <nil>
}
