package ford_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strconv"
	"sync"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// ExampleSmartConfig runs Smart-DTX on three memory nodes of a loop
// fabric: two workers, each with its own QPs and CQ, running up to four
// transactions at once, with every technique on. Eight goroutines
// increment one hot counter: lock conflicts back off and retry instead of
// aborting, and each commit still takes at most three round trips.
func ExampleSmartConfig() {
	ctx := context.Background()
	layout := ford.Layout{Buckets: 1024, ValueSize: 64, Coordinators: 16, LogSize: 4096}
	var nodes []string
	for i := range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: fmt.Sprintf("loop://smartdtx-example/n%d", i),
			Memory: layout.NodeBytes(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		nodes = append(nodes, srv.Info().CM)
	}
	db, err := ford.Dial(ctx, ford.Config{Device: "loop://smartdtx-example/client", Nodes: nodes, Layout: layout,
		Smart: &ford.SmartConfig{Workers: 2, Tasks: 4, Techniques: ford.AllTechniques}})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				err := txn.Run(ctx, db, func(tx txn.Tx) error {
					v, err := tx.Get([]byte("counter"))
					if err != nil && !errors.Is(err, txn.ErrNotFound) {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					return tx.Put([]byte("counter"), []byte(strconv.Itoa(n+1)))
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	var v []byte
	if err := txn.Run(ctx, db, func(tx txn.Tx) error { v, err = tx.Get([]byte("counter")); return err }); err != nil {
		log.Fatal(err)
	}
	st := db.Stats()
	fmt.Println("counter:", string(v))
	fmt.Println("workers:", len(db.SmartStats()), "at most 3 round trips per commit:", st.MaxCommitRounds <= 3)
	// Output:
	// counter: 200
	// workers: 2 at most 3 round trips per commit: true
}
