package objstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rdmakit/rdmakit/objstore"
)

// A store with 64 MiB of shared memory, one client creating an object in
// place and another reading it without a copy.
func Example() {
	ctx := context.Background()
	store, err := objstore.NewStore(objstore.Config{Mem: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	go store.Serve(ctx)

	writer, err := objstore.Connect(ctx, store.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer writer.Close()
	id := objstore.NewID()
	data, err := writer.Create(ctx, id, 5, []byte("text/plain"))
	if err != nil {
		log.Fatal(err)
	}
	copy(data, "hello") // written straight into the store's memory
	if err := writer.Seal(ctx, id); err != nil {
		log.Fatal(err)
	}
	if err := writer.Release(ctx, id); err != nil {
		log.Fatal(err)
	}

	reader, err := objstore.Connect(ctx, store.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()
	bufs, err := reader.Get(ctx, []objstore.ID{id}, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%s)\n", bufs[0].Data, bufs[0].Metadata)
	if err := reader.Release(ctx, id); err != nil {
		log.Fatal(err)
	}
	fmt.Println(store.Stats().References, "references left")
	// Output:
	// hello (text/plain)
	// 0 references left
}
