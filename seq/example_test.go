package seq_test

import (
	"context"
	"fmt"

	"github.com/rdmakit/rdmakit/seq"
	"github.com/rdmakit/rdmakit/verbs"
)

// Example hands out numbers with the one-sided FAA sequencer: the counter
// lives in the server's memory and the server's CPU takes no part.
func Example() {
	open := func(name string) (verbs.Device, verbs.CQ, verbs.QP, verbs.MR) {
		dev, _ := verbs.Open("loop://example-seq/" + name)
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(256)
		qp, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128}})
		mr, _ := pd.AllocMR(4096, verbs.AccessAll)
		return dev, cq, qp, mr
	}
	cdev, ccq, cqp, buf := open("client")
	sdev, _, sqp, counter := open("server")
	defer cdev.Close()
	defer sdev.Close()
	_ = verbs.ConnectRC(cqp, verbs.AccessAll, sdev.Address(), sqp.QPN())
	_ = verbs.ConnectRC(sqp, verbs.AccessAll, cdev.Address(), cqp.QPN())

	s, err := seq.NewFAA(cqp, ccq, buf, counter.Addr(), counter.RKey(), 16, verbs.PollAdaptive)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	a, _ := s.Next(ctx, 1)  // one number
	b, _ := s.Next(ctx, 10) // a block of ten: b, b+1, ..., b+9
	c, _ := s.Next(ctx, 1)
	fmt.Println(a, b, c)
	// Output: 0 1 11
}
