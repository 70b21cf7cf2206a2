package smart_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"sync"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// Example runs 2 workers with 4 tasks each against one memory node on a
// loop fabric. Every task adds 1 to a remote counter 100 times with
// FETCH_AND_ADD; the runtime gives each worker its own QP to the node and
// throttles the work requests in flight with its tuner.
func Example() {
	ctx := context.Background()
	open := func(uri string) (verbs.Device, verbs.PD) {
		d, err := verbs.Open(uri)
		if err != nil {
			log.Fatal(err)
		}
		pd, err := d.AllocPD()
		if err != nil {
			log.Fatal(err)
		}
		return d, pd
	}
	// The memory node: one region holding the counter.
	nodeDev, nodePD := open("loop://smart-example/node")
	defer nodeDev.Close()
	nodeCQ, err := nodeDev.CreateCQ(1024)
	if err != nil {
		log.Fatal(err)
	}
	counter, err := nodePD.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		log.Fatal(err)
	}
	// The compute side: one device and PD shared by every worker.
	dev, pd := open("loop://smart-example/compute")
	defer dev.Close()
	results, err := pd.AllocMR(4096, verbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	connect := func(ctx context.Context, cq verbs.CQ) (verbs.QP, error) {
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 256}})
		if err != nil {
			return nil, err
		}
		remote, err := nodePD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: nodeCQ, RecvCQ: nodeCQ})
		if err != nil {
			return nil, err
		}
		if err := verbs.ConnectRC(remote, verbs.AccessAll, dev.Address(), qp.QPN()); err != nil {
			return nil, err
		}
		return qp, verbs.ConnectRC(qp, verbs.AccessAll, nodeDev.Address(), remote.QPN())
	}
	rt, err := smart.New(ctx, smart.Config{Device: dev, PD: pd, Nodes: []smart.ConnectFunc{connect}, Workers: 2, Throttle: true})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()

	var wg sync.WaitGroup
	for wi, w := range rt.Workers() {
		for k := 0; k < 4; k++ {
			wg.Add(1)
			slot := wi*4 + k // each task's own 8 bytes for the fetched value
			go func() {
				defer wg.Done()
				err := w.Go(ctx, func(t *smart.Task) error {
					res := verbs.SGE{Addr: results.Addr() + uint64(8*slot), Length: 8, LKey: results.LKey()}
					for i := 0; i < 100; i++ {
						if err := t.FAA(0, res, counter.Addr(), counter.RKey(), 1); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
			}()
		}
	}
	wg.Wait()
	fmt.Println("counter:", binary.NativeEndian.Uint64(counter.Bytes()))
	// Output:
	// counter: 800
}
