package stores_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/stores"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// Example runs a PRISM-KV node and one client on an in-process loop
// fabric: the node lays its table out in a region of its device, the
// client reaches it over one RC connection. Over tcp, only the device
// URIs change (and rdmakit kv serve hosts the node).
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(uri string) (verbs.Device, verbs.PD, verbs.QP, verbs.CQ) {
		d, err := verbs.Open(uri)
		if err != nil {
			log.Fatal(err)
		}
		pd, err := d.AllocPD()
		if err != nil {
			log.Fatal(err)
		}
		cq, err := d.CreateCQ(4096)
		if err != nil {
			log.Fatal(err)
		}
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap})
		if err != nil {
			log.Fatal(err)
		}
		return d, pd, qp, cq
	}
	nodeDev, nodePD, nodeQP, nodeCQ := open("loop://example-kv/node")
	defer nodeDev.Close()
	clientDev, clientPD, clientQP, clientCQ := open("loop://example-kv/client")
	defer clientDev.Close()

	// The node: a table for about 10,000 keys of 64-byte values.
	srv, err := stores.NewServer("prism-kv", nodePD, 10000, 64)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := verbs.ConnectRC(nodeQP, verbs.AccessAll, clientDev.Address(), clientQP.QPN()); err != nil {
		log.Fatal(err)
	}
	serving := make(chan error, 1)
	go func() { serving <- srv.Serve(ctx, nodeQP, nodeCQ) }()
	defer func() { cancel(); <-serving }()

	// The client.
	if err := stores.ConnectClient(clientQP, nodeDev.Address(), nodeQP.QPN()); err != nil {
		log.Fatal(err)
	}
	c, err := stores.NewClient(ctx, "prism-kv", clientPD, clientQP, clientCQ, stores.ClientOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := c.Put(ctx, []byte("hello"), []byte("world")); err != nil {
		log.Fatal(err)
	}
	v, err := c.Get(ctx, []byte("hello"), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello = %s\n", v)
	if err := c.Delete(ctx, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	_, err = c.Get(ctx, []byte("hello"), nil)
	fmt.Println(errors.Is(err, kv.ErrNotFound))
	// Output:
	// hello = world
	// true
}
