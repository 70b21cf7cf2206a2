package prismrs_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/blockstore/prismrs"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// Three replicas and two clients on a loop fabric: the first client
// creates a volume of 16 blocks of 4 KiB, the second learns its layout
// from the replicas. A write and the reads after it complete with one
// replica down.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var replicas []string
	for i := range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: fmt.Sprintf("loop://rs-example/r%d", i), CM: "127.0.0.1:0",
			NewService: replica.Service(replica.Config{}, nil), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		replicas = append(replicas, srv.Info().CM)
	}
	a, err := prismrs.Create(ctx, prismrs.Config{Device: "loop://rs-example/a", Replicas: replicas}, 4096, 16)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := prismrs.Dial(ctx, prismrs.Config{Device: "loop://rs-example/b", Replicas: replicas})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println("layout:", b.Layout().Blocks, "blocks of", b.Layout().BlockSize, "bytes")

	loop.Get("rs-example").Kill("r1")
	data := make([]byte, 4096)
	copy(data, "hello, PRISM-RS")
	if err := a.Write(ctx, 7, data); err != nil {
		log.Fatal(err)
	}
	got, err := b.Read(ctx, 7, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("block 7: %q\n", got[:15])
	// Output:
	// layout: 16 blocks of 4096 bytes
	// block 7: "hello, PRISM-RS"
}
