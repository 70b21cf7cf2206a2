package sherman_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/memnode"
)

// Example_smartBT dials a Smart-BT client: Sherman's tree on Smart's
// runtime (2 workers × 4 tasks, each worker with its own QP to the
// memory node) with every technique on. A second Get of a key is served
// by speculative lookup: one READ of the key's leaf entry.
func Example_smartBT() {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://smartbt-example/mem", CM: "127.0.0.1:0",
		Memory: 4 << 20, Regions: 1, Token: "s3cret", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	tree, err := sherman.Dial(ctx, sherman.DialConfig{Device: "loop://smartbt-example/client",
		Nodes: []string{srv.Info().CM}, Token: "s3cret",
		Config: sherman.Config{Smart: &sherman.SmartConfig{Workers: 2, Tasks: 4, Techniques: sherman.AllTechniques}}})
	if err != nil {
		log.Fatal(err)
	}
	defer tree.Close()
	for _, k := range []string{"pear", "apple", "fig"} {
		if err := tree.Put(ctx, []byte(k), []byte("fruit:"+k)); err != nil {
			log.Fatal(err)
		}
	}
	v, _ := tree.Get(ctx, []byte("fig"), nil)  // reads the leaf, learns fig's entry
	v, _ = tree.Get(ctx, []byte("fig"), v[:0]) // reads fig's entry alone
	fmt.Println(string(v), tree.Stats().SpecHits)
	fmt.Println(len(tree.SmartStats()), "workers")
	// Output:
	// fruit:fig 1
	// 2 workers
}
