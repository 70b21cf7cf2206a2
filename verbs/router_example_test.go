package verbs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Two users share one QP and its CQ through a Router: one READs, the
// other WRITEs. Each puts its tag in its wr_ids and keeps the low bits
// for itself; the poller hands everything it polls to Dispatch.
func ExampleRouter() {
	client, server := connect("example-router")
	defer client.close()
	defer server.close()
	copy(server.mr.Bytes(), "remote bytes")

	var router verbs.Router
	reads, err := router.Register(func(wc *verbs.WC) error {
		fmt.Printf("reader: request %d %v, %d bytes\n", wc.ID&verbs.LowMask, wc.Status, wc.ByteLen)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	writes, err := router.Register(func(wc *verbs.WC) error {
		fmt.Printf("writer: request %d %v\n", wc.ID&verbs.LowMask, wc.Status)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	local := []verbs.SGE{{Addr: client.mr.Addr(), Length: 12, LKey: client.mr.LKey()}}
	err = client.qp.PostSend([]verbs.SendWR{
		{ID: reads.ID(1), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: local,
			RemoteAddr: server.mr.Addr(), RKey: server.mr.RKey()},
		{ID: writes.ID(2), Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled | verbs.FlagFence, SGL: local,
			RemoteAddr: server.mr.Addr() + 64, RKey: server.mr.RKey()},
	})
	if err != nil {
		log.Fatal(err)
	}

	// The poller: whatever it polls goes to the owner of the request.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 16)
	for done := 0; done < 2; {
		n, err := verbs.PollWait(ctx, client.cq, wc, verbs.PollAdaptive)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := router.Dispatch(wc[:n]); err != nil {
			log.Fatal(err)
		}
		done += n
	}
	fmt.Printf("server: %q\n", server.mr.Bytes()[64:76])
	// Output:
	// reader: request 1 SUCCESS, 12 bytes
	// writer: request 2 SUCCESS
	// server: "remote bytes"
}
