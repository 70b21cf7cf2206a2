package prism_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rdmakit/rdmakit/prism"
	"github.com/rdmakit/rdmakit/verbs"
)

// A key-value store's PUT in PRISM style: the server only keeps a pool;
// the client allocates the new item, writes it and installs it in the
// key's slot with one post list, then reads the slot in one round trip.
func Example() {
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	server, err := verbs.Open("loop://prism-example/server")
	must(err)
	defer server.Close()
	client, err := verbs.Open("loop://prism-example/client")
	must(err)
	defer client.Close()
	spd, _ := server.AllocPD()
	cpd, _ := client.AllocPD()
	scq, _ := server.CreateCQ(16)
	ccq, _ := client.CreateCQ(16)
	sqp, _ := spd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: scq, RecvCQ: scq})
	cqp, _ := cpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ccq, RecvCQ: ccq})
	must(verbs.ConnectRC(cqp, verbs.AccessAll, server.Address(), sqp.QPN()))
	must(verbs.ConnectRC(sqp, verbs.AccessAll, client.Address(), cqp.QPN()))

	// Server: a pool region whose last 64 bytes hold the key's slot.
	region, _ := spd.AllocMR(1<<16, verbs.AccessAll)
	pool, err := prism.NewPool(region, prism.PoolConfig{MinSize: 64, MaxSize: 1024, Stock: 8})
	must(err)
	slot := region.Addr() + uint64(region.Len()-64)

	// Client: write "hello, prism" as the key's new item.
	buf, _ := cpd.AllocMR(4096, verbs.AccessAll)
	copy(buf.Bytes(), "hello, prism")
	item := verbs.SGE{Addr: buf.Addr(), Length: 12, LKey: buf.LKey()}
	prev := verbs.SGE{Addr: buf.Addr() + 1024, Length: 8, LKey: buf.LKey()}
	queue, _, _ := pool.Class(12)
	wrs := make([]verbs.SendWR, 2)
	run := func(list []verbs.SendWR) verbs.WC {
		must(cqp.PostSend(list))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		wc := make([]verbs.WC, 1)
		_, err := verbs.PollWait(ctx, ccq, wc, verbs.PollAdaptive)
		must(err)
		return wc[0]
	}
	// The slot is empty (0): install if it still is.
	wc := run(prism.AllocWriteInstall(wrs, 1, item, region.RKey(), queue, slot, 0, prev, 0))
	fmt.Println("install:", wc.Status)

	out := verbs.SGE{Addr: buf.Addr() + 2048, Length: 64, LKey: buf.LKey()}
	wc = run(prism.IndirectRead(wrs, 2, out, region.RKey(), slot, false))
	fmt.Printf("get: %s %q\n", wc.Status, buf.Bytes()[2048:2048+12])
	// Output:
	// install: SUCCESS
	// get: SUCCESS "hello, prism"
}
