package sherman_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/memnode"
)

// Example serves 4 MiB on a memory node (a loop fabric in this process;
// over tcp only the device URIs change), dials a Sherman client to it,
// writes three keys and scans them back in order.
func Example() {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://sherman-example/mem", CM: "127.0.0.1:0",
		Memory: 4 << 20, Regions: 1, Token: "s3cret", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	tree, err := sherman.Dial(ctx, sherman.DialConfig{Device: "loop://sherman-example/client",
		Nodes: []string{srv.Info().CM}, Token: "s3cret"})
	if err != nil {
		log.Fatal(err)
	}
	defer tree.Close()
	for _, k := range []string{"pear", "apple", "fig"} {
		if err := tree.Put(ctx, []byte(k), []byte("fruit:"+k)); err != nil {
			log.Fatal(err)
		}
	}
	v, _ := tree.Get(ctx, []byte("fig"), nil)
	fmt.Println(string(v))
	it := tree.Scan(ctx, []byte("b"), nil, 0)
	defer it.Close()
	for it.Next() {
		fmt.Println(string(it.Key()))
	}
	// Output:
	// fruit:fig
	// fig
	// pear
}
