package ford_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// Example runs FORD on three memory nodes of an in-process loop fabric:
// plain memnode servers, each serving one region the size the layout
// asks for. A transfer commits in three round trips after execution:
// validation of the record only read, the log WRITE, then one list per
// node writing the new values and unlocking.
func Example() {
	ctx := context.Background()
	layout := ford.Layout{Buckets: 1024, ValueSize: 64, Coordinators: 8, LogSize: 4096}
	var nodes []string
	for i := range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: fmt.Sprintf("loop://ford-example/n%d", i),
			Memory: layout.NodeBytes(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		nodes = append(nodes, srv.Info().CM)
	}
	db, err := ford.Dial(ctx, ford.Config{Device: "loop://ford-example/client", Nodes: nodes, Layout: layout})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = txn.Run(ctx, db, func(tx txn.Tx) error {
		for _, k := range []string{"alice", "bob", "rate"} {
			if err := tx.Put([]byte(k), []byte("100")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	before := db.Stats()
	err = txn.Run(ctx, db, func(tx txn.Tx) error {
		if _, err := tx.Get([]byte("rate")); err != nil { // read only: validated at commit
			return err
		}
		if _, err := tx.Get([]byte("alice")); err != nil {
			return err
		}
		if err := tx.Put([]byte("alice"), []byte("90")); err != nil { // locked and read in one list
			return err
		}
		return tx.Put([]byte("bob"), []byte("110"))
	})
	if err != nil {
		log.Fatal(err)
	}
	st := db.Stats()
	fmt.Println("round trips after execution:", st.CommitRounds-before.CommitRounds)
	tx, _ := db.Begin(ctx)
	a, _ := tx.Get([]byte("alice"))
	b, _ := tx.Get([]byte("bob"))
	tx.Commit()
	fmt.Println("alice", string(a), "bob", string(b))
	// Output:
	// round trips after execution: 3
	// alice 90 bob 110
}
