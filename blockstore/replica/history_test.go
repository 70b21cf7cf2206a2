package replica_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/check"
)

// The recovery tests' history: porcupine's (a register per block) and,
// per value written, when its write was called and returned, for the
// lost-write check.

// store is a client of either design.
type store interface {
	blockstore.Store
	Connected() int
}

// opTimeout bounds one operation of the recovery tests.
const opTimeout = 10 * time.Second

// blockOf is the block that writes value v: v in its first 8 bytes, then
// bytes derived from v, so that a torn block shows.
func blockOf(bs int, v uint64) []byte {
	d := make([]byte, bs)
	binary.LittleEndian.PutUint64(d, v)
	for i := 8; i < bs; i++ {
		d[i] = byte(v*31 + uint64(i))
	}
	return d
}

// valueOf decodes blockOf's block (zeros: 0).
func valueOf(d []byte) (uint64, error) {
	v := binary.LittleEndian.Uint64(d)
	for i := 8; i < len(d); i++ {
		want := byte(v*31 + uint64(i))
		if v == 0 {
			want = 0
		}
		if d[i] != want {
			return 0, fmt.Errorf("block of value %d torn at byte %d", v, i)
		}
	}
	return v, nil
}

// written is one write: its block, its times, whether it was acked.
type written struct {
	id        uint64
	call, ret int64
	acked     bool
}

// recorder records a run's operations.
type recorder struct {
	h    *check.RegisterHistory
	next atomic.Uint64 // the last value written
	done atomic.Uint64 // operations completed
	mu   sync.Mutex
	ws   map[uint64]written // by value
}

func newRecorder() *recorder {
	return &recorder{h: check.NewRegisterHistory(), ws: map[uint64]written{}}
}

// addWrite records a write of value v to block id, called and returned
// at call and ret, acked or not.
func (r *recorder) addWrite(client int, id, v uint64, call, ret int64, acked bool) {
	r.h.Add(client, check.RegisterInput{Write: true, Register: id, Value: v}, check.RegisterOutput{}, call, ret, !acked)
	if !acked {
		ret = math.MaxInt64
	}
	r.mu.Lock()
	r.ws[v] = written{id: id, call: call, ret: ret, acked: acked}
	r.mu.Unlock()
	r.done.Add(1)
}

// write writes a new value to block id through c.
func (r *recorder) write(c store, client int, id uint64) error {
	v := r.next.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	call := r.h.Now()
	err := c.Write(ctx, id, blockOf(c.Layout().BlockSize, v))
	r.addWrite(client, id, v, call, r.h.Now(), err == nil)
	if err != nil {
		return fmt.Errorf("client %d: write of block %d: %w", client, id, err)
	}
	return nil
}

// read reads block id through c and returns its value.
func (r *recorder) read(c store, client int, id uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	call := r.h.Now()
	d, err := c.Read(ctx, id, nil)
	if err != nil {
		return 0, fmt.Errorf("client %d: read of block %d: %w", client, id, err)
	}
	ret := r.h.Now()
	v, err := valueOf(d)
	if err != nil {
		return 0, fmt.Errorf("client %d: block %d: %w", client, id, err)
	}
	r.h.Add(client, check.RegisterInput{Register: id}, check.RegisterOutput{Value: v}, call, ret, false)
	r.done.Add(1)
	return v, nil
}

// lost lists the acknowledged writes that final, each block's value read
// after every operation ended, shows lost: an acked write called after
// the write of the final value had returned (or any acked write, when
// the final value is 0) is lost.
func (r *recorder) lost(final map[uint64]uint64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for v, w := range r.ws {
		if !w.acked {
			continue
		}
		u, ok := final[w.id]
		if !ok {
			continue
		}
		if u == 0 {
			out = append(out, fmt.Sprintf("block %d: acked write of %d lost (the block reads zeros)", w.id, v))
			continue
		}
		if fw := r.ws[u]; w.call > fw.ret {
			out = append(out, fmt.Sprintf("block %d: acked write of %d lost (the block reads %d, written before it)", w.id, v, u))
		}
	}
	sort.Strings(out)
	return out
}

// run drives the clients cs, one goroutine each, on blocks 0 to
// blocks-1 (half writes) until stop closes; errors go to errs.
func (r *recorder) run(cs []store, blocks uint64, stop <-chan struct{}, errs chan<- error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := rng.Uint64N(blocks)
				var err error
				if rng.IntN(2) == 0 {
					err = r.write(c, i, id)
				} else {
					_, err = r.read(c, i, id)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	return &wg
}

// waitOps waits until n operations are done, at most d.
func (r *recorder) waitOps(n uint64, d time.Duration) error {
	deadline := time.Now().Add(d)
	for r.done.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d operations after %v, want %d", r.done.Load(), d, n)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// waitConnected waits until every client has a connection to all n
// replicas, at most d.
func waitConnected(cs []store, n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, c := range cs {
		for c.Connected() < n {
			if time.Now().After(deadline) {
				return fmt.Errorf("a client reaches %d of %d replicas after %v", c.Connected(), n, d)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return nil
}
