package tcp

import (
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// writeStats count the writes of request frames a device's links made
// and the requests they carried: concurrent posters on one link share a
// write (Flush), and their ratio is how many requests a round trip on
// the wire carries — what a benchmark compares with a batching peer's
// keys per request.
type writeStats struct {
	writes   atomic.Uint64
	requests atomic.Uint64
}

func (w *writeStats) add(requests int64) {
	w.writes.Add(1)
	w.requests.Add(uint64(requests))
}

// Batching returns how many writes of request frames dev's links made so
// far (each one write(2) of everything queued) and how many requests
// (not datagrams) they carried.
func Batching(dev verbs.Device) (writes, requests uint64, err error) {
	d, ok := dev.(*device)
	if !ok {
		return 0, 0, fmt.Errorf("%w: %T is not a tcp device", verbs.ErrInvalidArg, dev)
	}
	return d.batching.writes.Load(), d.batching.requests.Load(), nil
}
