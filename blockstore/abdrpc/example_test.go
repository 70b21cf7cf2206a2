package abdrpc_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/abdrpc"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/loop"
)

// Three replicas on an in-process loop fabric, a 4 KiB-block volume on
// them, and a client that writes a block and reads it back.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	var addrs []string
	for i := range 3 {
		srv, err := memnode.Start(ctx, memnode.Config{Device: fmt.Sprintf("loop://abd-example/r%d", i), CM: "127.0.0.1:0",
			NewService: replica.Service(replica.Config{MaxMemory: 16 << 20, Spare: 64}, nil), Logger: quiet})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer srv.Close()
		addrs = append(addrs, srv.Info().CM)
	}
	cfg := abdrpc.Config{Replicas: addrs, Device: "loop://abd-example/client", Logger: quiet}
	if err := abdrpc.Create(ctx, cfg, blockstore.Layout{BlockSize: 4096, Blocks: 128}); err != nil {
		fmt.Println(err)
		return
	}
	c, err := abdrpc.Dial(ctx, cfg) // the layout comes from the replicas
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if err := c.Write(ctx, 7, bytes.Repeat([]byte("abd!"), 1024)); err != nil {
		fmt.Println(err)
		return
	}
	b, err := c.Read(ctx, 7, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d blocks of %d bytes; block 7 starts %q\n", c.Layout().Blocks, c.Layout().BlockSize, b[:8])
	// Output: 128 blocks of 4096 bytes; block 7 starts "abd!abd!"
}
