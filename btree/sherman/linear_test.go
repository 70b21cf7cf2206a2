package sherman_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/rdmakit/rdmakit/btree/btreetest"
	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/check"
)

// long reports whether the long runs are asked for (SHERMAN_LONG=1).
func long() bool { return os.Getenv("SHERMAN_LONG") != "" }

// runLinear runs ops operations from procs clients of tasks tasks each
// on bed b and checks the history with porcupine. A task's i-th
// operation picks one of keys keys from i/8 on: the window drifts, so
// new keys (and splits) keep coming for the whole run while each key
// sees contention. It returns the splits the clients made.
func runLinear(t *testing.T, b *bed, procs, tasks, ops, keys int, cfg sherman.Config, during func()) uint64 {
	ctx := context.Background()
	h := check.NewKVHistory()
	var mu sync.Mutex
	var all []porcupine.Operation
	var wg sync.WaitGroup
	per := ops / (procs * tasks)
	var clients []*sherman.Client
	for p := range procs {
		c := b.client(t, cfg)
		clients = append(clients, c)
		for k := range tasks {
			id := p*tasks + k
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(id), 7))
				for i := range per {
					op, err := btreetest.RandomOp(ctx, c, h, r, id, i, keys)
					if err != nil {
						t.Errorf("client %d: %v", id, err)
						return
					}
					mu.Lock()
					all = append(all, op)
					mu.Unlock()
				}
			}()
		}
	}
	if during != nil {
		during()
	}
	wg.Wait()
	var splits uint64
	for _, c := range clients {
		splits += c.Stats().Splits
	}
	if t.Failed() {
		return splits
	}
	res, info := h.Check(time.Minute)
	if res != porcupine.Ok {
		f, _ := os.CreateTemp("", "sherman-porcupine-*.html")
		if f != nil {
			porcupine.Visualize(check.KVModel, info, f)
			f.Close()
			t.Errorf("history of %d operations: %v (visualization: %s)", h.Len(), res, f.Name())
			dumpIllegal(t, all)
		} else {
			t.Errorf("history of %d operations: %v", h.Len(), res)
		}
	}
	if !t.Failed() {
		t.Logf("%d operations linearizable, %d splits", h.Len(), splits)
	}
	return splits
}

// TestLinearizable: 16 clients (4 processes × 4 tasks, so that tasks of
// a process meet in the local lock table) on 64 keys in leaves of 4
// entries: splits under contention, checked by porcupine per key.
func TestLinearizable(t *testing.T) {
	ops := 20000
	if long() {
		ops = 200000
	}
	b := newBed(t, 1, 16<<20)
	if splits := runLinear(t, b, 4, 4, ops, 64, sherman.Config{Layout: small}, nil); splits < uint64(ops/8/16/4) {
		t.Fatalf("only %d splits", splits)
	}
}

// TestLinearizableTwoNodes spreads the tree over two memory nodes.
func TestLinearizableTwoNodes(t *testing.T) {
	b := newBed(t, 2, 8<<20)
	runLinear(t, b, 2, 4, 8000, 48, sherman.Config{Layout: small}, nil)
}

// dumpIllegal logs the operations of the first key whose history alone
// is not linearizable.
func dumpIllegal(t *testing.T, all []porcupine.Operation) {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range all {
		k := op.Input.(check.KVInput).Key
		byKey[k] = append(byKey[k], op)
	}
	for k, ops := range byKey {
		if porcupine.CheckOperations(check.KVModel, ops) {
			continue
		}
		slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		for _, op := range ops {
			t.Logf("%s c%d [%d,%d] %+v -> %+v", k, op.ClientId, op.Call, op.Return, op.Input, op.Output)
		}
		return
	}
}
