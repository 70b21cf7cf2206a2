package smart_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/smart"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var fabricSeq atomic.Int64

// memoryNode is a remote node with one region; connect makes QPs to it.
type memoryNode struct {
	dev  verbs.Device
	pd   verbs.PD
	cq   verbs.CQ
	mr   verbs.MR
	seen atomic.Int64
}

func newMemoryNode(t testing.TB, fabric, name string) *memoryNode {
	t.Helper()
	dev, err := verbs.Open("loop://" + fabric + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(4096)
	mr, _ := pd.AllocMR(1<<16, verbs.AccessAll)
	return &memoryNode{dev: dev, pd: pd, cq: cq, mr: mr}
}

func (n *memoryNode) connect(client verbs.Device) smart.ConnectFunc {
	return func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
		pd := clientPD[client]
		q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1024}})
		if err != nil {
			return nil, err
		}
		sq, err := n.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: n.cq, RecvCQ: n.cq})
		if err != nil {
			return nil, err
		}
		if err := verbs.ConnectRC(q, verbs.AccessAll, n.dev.Address(), sq.QPN()); err != nil {
			return nil, err
		}
		n.seen.Add(1)
		return q, verbs.ConnectRC(sq, verbs.AccessAll, client.Address(), q.QPN())
	}
}

var (
	clientPDMu sync.Mutex
	clientPD   = map[verbs.Device]verbs.PD{}
)

func newClient(t testing.TB, fabric string) (verbs.Device, verbs.PD, verbs.MR) {
	dev, err := verbs.Open("loop://" + fabric + "/client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, _ := dev.AllocPD()
	clientPDMu.Lock()
	clientPD[dev] = pd
	clientPDMu.Unlock()
	buf, _ := pd.AllocMR(1<<16, verbs.AccessAll)
	return dev, pd, buf
}

func TestRuntimeSharingModes(t *testing.T) {
	for _, mode := range []smart.Sharing{smart.PerWorker, smart.SharedPath, smart.Multiplexed, smart.SharedQP} {
		t.Run(mode.String(), func(t *testing.T) {
			fabric := fmt.Sprintf("smart%d", fabricSeq.Add(1))
			node := newMemoryNode(t, fabric, "mem")
			dev, pd, buf := newClient(t, fabric)
			rt, err := smart.New(context.Background(), smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{node.connect(dev)},
				Workers: 4, Sharing: mode, Multiplex: 2, Throttle: true, Tuner: smart.TunerConfig{Delta: time.Millisecond, Stable: 5 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			wantQPs := map[smart.Sharing]int64{smart.PerWorker: 4, smart.SharedPath: 4, smart.Multiplexed: 2, smart.SharedQP: 1}[mode]
			if node.seen.Load() != wantQPs {
				t.Errorf("%d QPs to the node, want %d", node.seen.Load(), wantQPs)
			}
			const tasks, adds = 4, 300
			var wg sync.WaitGroup
			for wi, w := range rt.Workers() {
				for k := 0; k < tasks; k++ {
					wg.Add(1)
					go func(w *smart.Worker, slot int) {
						defer wg.Done()
						err := w.Go(context.Background(), func(tk *smart.Task) error {
							res := verbs.SGE{Addr: buf.Addr() + uint64(slot*8), Length: 8, LKey: buf.LKey()}
							for i := 0; i < adds; i++ {
								if err := tk.FAA(0, res, node.mr.Addr(), node.mr.RKey(), 1); err != nil {
									return err
								}
							}
							// A batch: WRITE then READ back, one list.
							out := verbs.SGE{Addr: buf.Addr() + 4096 + uint64(slot*8), Length: 8, LKey: buf.LKey()}
							in := verbs.SGE{Addr: buf.Addr() + 8192 + uint64(slot*8), Length: 8, LKey: buf.LKey()}
							binary.NativeEndian.PutUint64(buf.Bytes()[4096+slot*8:], uint64(slot+100))
							remote := node.mr.Addr() + 512 + uint64(slot*8)
							if err := tk.Add(0, verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{out}, RemoteAddr: remote, RKey: node.mr.RKey()}); err != nil {
								return err
							}
							if err := tk.Add(0, verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{in}, RemoteAddr: remote, RKey: node.mr.RKey()}); err != nil {
								return err
							}
							if _, err := tk.Commit(); err != nil {
								return err
							}
							if got := binary.NativeEndian.Uint64(buf.Bytes()[8192+slot*8:]); got != uint64(slot+100) {
								return fmt.Errorf("batch read back %d, want %d", got, slot+100)
							}
							return nil
						})
						if err != nil {
							t.Error(err)
						}
					}(w, wi*tasks+k)
				}
			}
			wg.Wait()
			if got := binary.NativeEndian.Uint64(node.mr.Bytes()); got != uint64(4*tasks*adds) {
				t.Errorf("counter %d, want %d", got, 4*tasks*adds)
			}
			var done uint64
			for _, w := range rt.Workers() {
				done += w.Stats().Completed
			}
			if done < uint64(4*tasks*(adds+2)) {
				t.Errorf("workers completed %d requests, want at least %d", done, 4*tasks*(adds+2))
			}
		})
	}
}

// TestRuntimeConflictAvoidance runs CAS-increment loops on two hot slots
// with backoff: every increment lands, and the controller observed the
// contention.
func TestRuntimeConflictAvoidance(t *testing.T) {
	fabric := fmt.Sprintf("smart%d", fabricSeq.Add(1))
	node := newMemoryNode(t, fabric, "mem")
	dev, pd, buf := newClient(t, fabric)
	rt, err := smart.New(context.Background(), smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{node.connect(dev)}, Workers: 2,
		Backoff: smart.BackoffConfig{C0: time.Microsecond, Dynamic: true, Throttle: true, Tasks: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var wg sync.WaitGroup
	var retries atomic.Int64
	const per = 200
	for i, w := range rt.Workers() {
		for k := 0; k < 4; k++ {
			wg.Add(1)
			go func(w *smart.Worker, id int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(id), 7))
				err := w.Go(context.Background(), func(tk *smart.Task) error {
					res := verbs.SGE{Addr: buf.Addr() + uint64(id*64), Length: 8, LKey: buf.LKey()}
					for n := 0; n < per; n++ {
						slot := node.mr.Addr() + uint64(8*(n%2))
						if err := tk.Read(0, res, slot, node.mr.RKey()); err != nil {
							return err
						}
						cur := binary.NativeEndian.Uint64(buf.Bytes()[id*64:])
						k := 0
						for {
							if err := tk.CAS(0, res, slot, node.mr.RKey(), cur, cur+1); err != nil {
								return err
							}
							got := binary.NativeEndian.Uint64(buf.Bytes()[id*64:])
							if got == cur {
								break
							}
							cur = got
							k++
							retries.Add(1)
							tk.Backoff(k, rng.Float64())
						}
						tk.Finished(k)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}(w, i*4+k)
		}
	}
	wg.Wait()
	sum := binary.NativeEndian.Uint64(node.mr.Bytes()) + binary.NativeEndian.Uint64(node.mr.Bytes()[8:])
	if sum != 8*per {
		t.Fatalf("increments %d, want %d", sum, 8*per)
	}
	t.Logf("%d retries for %d increments; worker 0: %+v", retries.Load(), 8*per, rt.Workers()[0].Stats())
}
