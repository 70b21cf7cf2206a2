package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/rdmakit/rdmakit/workload"
)

// ycsbBench is one `kv bench` or `rs bench` run: y over dbs, loading
// first when load is set, then the report. trips, when not nil, counts
// the clients' round trips so far.
type ycsbBench struct {
	y      *workload.YCSB
	dbs    []ycsb.DB
	load   bool
	what   string // "records" or "blocks", for the load line
	header string // the report's first line, before its elapsed time
	trips  func() uint64
}

// run loads (or only builds) the workload, runs it and prints the report
// to w: rate, p50, p99, round trips per operation, errors.
func (b ycsbBench) run(ctx context.Context, w io.Writer) error {
	y := b.y
	var wl ycsb.Workload
	var err error
	if b.load {
		t0 := time.Now()
		if wl, err = y.Load(ctx, b.dbs); err != nil {
			return err
		}
		fmt.Fprintf(w, "loaded %d %s of %d bytes in %v\n", y.Records, b.what, y.ValueSize, time.Since(t0).Round(time.Millisecond))
	} else if wl, err = y.Load(ctx, nil); err != nil {
		return err
	}
	var trips0 uint64
	if b.trips != nil {
		trips0 = b.trips()
	}
	r, err := y.Run(ctx, wl, b.dbs)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s, %v\n", b.header, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  ops/s        %.0f\n  p50          %.1f µs\n  p99          %.1f µs\n", r.Rate(), float64(r.P50)/1e3, float64(r.P99)/1e3)
	if b.trips != nil {
		fmt.Fprintf(w, "  round trips  %.2f per op\n", float64(b.trips()-trips0)/float64(max(r.Ops, 1)))
	}
	fmt.Fprintf(w, "  errors       %d\n", r.Errors)
	if r.FirstErr != nil {
		fmt.Fprintf(w, "  first error  %v\n", r.FirstErr)
	}
	return nil
}
