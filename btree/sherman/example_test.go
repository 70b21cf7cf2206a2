package sherman_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// Example serves 4 MiB on a memory node (a loop fabric in this process;
// over tcp only the device URIs change), opens a Sherman client on it,
// writes three keys and scans them back in order.
func Example() {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://sherman-example/mem", CM: "127.0.0.1:0",
		Memory: 4 << 20, Regions: 1, Token: "s3cret", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	dev, err := verbs.Open("loop://sherman-example/client")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(256)
	conn, err := cm.Dial(ctx, dev, srv.Info().CM, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq,
		Cap:         verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		PrivateData: memnode.Hello{Token: "s3cret"}.Marshal()})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	regions, _ := cm.DecodeDescs(conn.PeerPrivateData())

	tree, err := sherman.Open(ctx, pd, []sherman.Conn{{QP: conn.QP(), CQ: cq,
		Region: sherman.Region{Addr: regions[0].Addr, Len: regions[0].Len, RKey: regions[0].RKey}}}, sherman.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer tree.Close()
	for _, k := range []string{"pear", "apple", "fig"} {
		if err := tree.Put(ctx, []byte(k), []byte("fruit:"+k)); err != nil {
			log.Fatal(err)
		}
	}
	v, _ := tree.Get(ctx, []byte("fig"), nil)
	fmt.Println(string(v))
	it := tree.Scan(ctx, []byte("b"), nil, 0)
	defer it.Close()
	for it.Next() {
		fmt.Println(string(it.Key()))
	}
	// Output:
	// fruit:fig
	// fig
	// pear
}
