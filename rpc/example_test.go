package rpc_test

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// Example serves an "upper-case" method and calls it HERD-style: the
// request is WRITTEN into the server's request region, the answer SENT
// back.
func Example() {
	open := func(name string) (verbs.Device, verbs.PD, verbs.CQ, verbs.QP) {
		dev, _ := verbs.Open("loop://example-rpc/" + name)
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(256)
		qp, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128}})
		return dev, pd, cq, qp
	}
	cdev, cpd, ccq, cqp := open("client")
	sdev, spd, scq, sqp := open("server")
	defer cdev.Close()
	defer sdev.Close()
	_ = verbs.ConnectRC(cqp, verbs.AccessAll, sdev.Address(), sqp.QPN())
	_ = verbs.ConnectRC(sqp, verbs.AccessAll, cdev.Address(), cqp.QPN())

	const upper = 1
	srv := rpc.NewServer(rpc.ServerConfig{})
	srv.Handle(upper, func(req, resp []byte) (int, error) {
		for i, b := range req {
			if 'a' <= b && b <= 'z' {
				b -= 'a' - 'A'
			}
			resp[i] = b
		}
		return len(req), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, spd, sqp, scq) }()
	defer func() { cancel(); <-served }() // stop the server before the devices close

	c, err := rpc.NewClient(cpd, cqp, ccq, rpc.ClientConfig{Herd: true, Inline: verbs.DefaultMaxInlineData})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	resp := make([]byte, 64)
	n, err := c.Call(ctx, upper, []byte("hello, herd"), resp)
	fmt.Println(string(resp[:n]), err)
	// Output: HELLO, HERD <nil>
}
