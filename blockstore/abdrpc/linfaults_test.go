package abdrpc_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rdmakit/rdmakit/check"
)

// TestLinearizableUnderFaults: 16 clients, 20,000 operations on 8
// blocks, no pacing, while the loop fabric pauses one replica of three
// for 1–20 ms, or (every other fault) cuts half the clients each from
// one replica of its own (a partition), and once two thirds are done
// kills a replica for the rest of the run. A majority is always
// reachable, so every operation must succeed, and porcupine must find
// the history linearizable (a register per block).
func TestLinearizableUnderFaults(t *testing.T) {
	const (
		clients = 16
		blocks  = 8
		ops     = 20000
		bs      = 512
	)
	cl := startCluster(t, 3, "", nil)
	cl.create(bs, blocks)
	first := int(cl.clients.Load()) + 1 // the next client device is c<first>
	cs := make([]*clientT, clients)
	for i := range cs {
		cs[i] = &clientT{c: cl.dial(), i: i}
	}
	h := check.NewKVHistory()
	var failed atomic.Int64
	var done atomic.Int64
	stop := make(chan struct{})
	var faults, killedAt int
	faultsDone := make(chan error, 1)
	go func() {
		f := cl.fab()
		rng := rand.New(rand.NewPCG(3, 4))
		for done.Load() < 2*ops/3 {
			select {
			case <-stop:
				faultsDone <- nil
				return
			default:
			}
			if faults%2 == 1 {
				var cut [][2]string
				for c := range clients {
					if rng.IntN(2) == 0 {
						continue
					}
					pair := [2]string{fmt.Sprintf("c%d", first+c), fmt.Sprintf("r%d", rng.IntN(3))}
					if err := f.Partition(pair[0], pair[1]); err != nil {
						faultsDone <- err
						return
					}
					cut = append(cut, pair)
				}
				time.Sleep(time.Millisecond + time.Duration(rng.IntN(20))*time.Millisecond)
				for _, p := range cut {
					if err := f.Heal(p[0], p[1]); err != nil {
						faultsDone <- err
						return
					}
				}
			} else {
				r := fmt.Sprintf("r%d", rng.IntN(3))
				if err := f.Pause(r); err != nil {
					faultsDone <- err
					return
				}
				time.Sleep(time.Millisecond + time.Duration(rng.IntN(20))*time.Millisecond)
				if err := f.Resume(r); err != nil {
					faultsDone <- err
					return
				}
			}
			faults++
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
		killedAt = int(done.Load())
		faultsDone <- f.Kill(fmt.Sprintf("r%d", rng.IntN(3)))
	}()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c.i), 9))
			for j := 0; done.Add(1) <= ops; j++ {
				id := rng.Uint64N(blocks)
				if rng.IntN(2) == 0 {
					c.write(t, h, id, uint64(c.i+1)<<32|uint64(j+1), bs, &failed)
				} else {
					c.read(t, h, id, &failed)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-faultsDone; err != nil {
		t.Fatal(err)
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d operations failed while a majority was always reachable", n)
	}
	if h.Len() < ops || faults < 6 || killedAt == 0 {
		t.Fatalf("%d operations, %d faults, killed after %d: not the schedule wanted", h.Len(), faults, killedAt)
	}
	res, info := h.Check(60 * time.Second)
	if res != porcupine.Ok {
		t.Fatalf("%d operations: %v (%d partial linearizations)", h.Len(), res, len(info.PartialLinearizations()))
	}
	t.Logf("%d operations, linearizable, %d pauses and partitions, a replica killed after %d", h.Len(), faults, killedAt)
}
