package workload_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"
	"github.com/rdmakit/rdmakit/workload"
)

// Example loads 1,000 records into a kv.Store (here a map; any rdmakit
// store client, or a memcached or Redis adapter, works the same) and runs
// YCSB-A with scrambled zipfian keys from 4 goroutines for 100 ms.
func Example() {
	ctx := context.Background()
	store := &mapStore{m: map[string][]byte{}}
	db := workload.DB{Store: store}
	y := workload.YCSB{Workload: "a", Distribution: "zipfian", Records: 1000, ValueSize: 64,
		Threads: 4, Duration: 100 * time.Millisecond}
	wl, err := y.Load(ctx, []ycsb.DB{db, db})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("loaded:", len(store.m))
	res, err := y.Run(ctx, wl, []ycsb.DB{db})
	if err != nil {
		log.Fatal(err)
	}
	// A real run reports res.Rate() operations per second, res.P50 and
	// res.P99.
	fmt.Println("ran operations:", res.Ops > 0, "errors:", res.Errors)
	// Output:
	// loaded: 1000
	// ran operations: true errors: 0
}
