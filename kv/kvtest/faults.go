package kvtest

import (
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// LoopFaults returns a LinConfig.Faults for a bed on the loop fabric
// named fabric: every 5 ms it sets a new latency between "client" and
// "node" (0 to 300 µs) or pauses the node for 2 ms, until stop closes; then
// it heals everything.
func LoopFaults(fabric string) func(stop <-chan struct{}) {
	return func(stop <-chan struct{}) {
		f := loop.Get(fabric)
		for i := 0; ; i++ {
			select {
			case <-stop:
				f.SetLatency("client", "node", 0)
				f.Resume("node")
				return
			case <-time.After(5 * time.Millisecond):
			}
			switch i % 3 {
			case 0:
				f.SetLatency("client", "node", time.Duration(i%7)*50*time.Microsecond)
			case 1:
				f.Pause("node")
				time.Sleep(2 * time.Millisecond)
				f.Resume("node")
			}
		}
	}
}

// Stores returns cs as kv.Stores.
func Stores[T kv.Store](cs []T) []kv.Store {
	out := make([]kv.Store, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}
