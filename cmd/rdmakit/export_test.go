package main

import (
	"time"

	"github.com/rdmakit/rdmakit/bench/perf"
)

// perfEchoTimeout sets perf.EchoTimeout and returns the old value.
func perfEchoTimeout(d time.Duration) time.Duration {
	old := perf.EchoTimeout
	perf.EchoTimeout = d
	return old
}
