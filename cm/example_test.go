package cm_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	_ "github.com/rdmakit/rdmakit/transport/loop" // registers loop://
	"github.com/rdmakit/rdmakit/verbs"
)

// side is what each end sets up before connecting: a device, a PD, a CQ
// and a registered buffer.
type side struct {
	dev verbs.Device
	pd  verbs.PD
	cq  verbs.CQ
	mr  verbs.MR
}

func setup(uri string) *side {
	dev, err := verbs.Open(uri)
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.AllocMR(4096, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	return &side{dev, pd, cq, mr}
}

// The server listens and hands the descriptor of a buffer to whoever
// connects, as private data; the client dials, decodes the descriptor and
// READs the buffer with one-sided RDMA.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Server.
	server := setup("loop://cm-example/server")
	defer server.dev.Close()
	copy(server.mr.Bytes(), "the server's registered memory")
	l, err := cm.Listen(ctx, server.dev, "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *cm.Conn, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("server: request from %s saying %q\n", req.PeerAddress(), req.PrivateData())
		conn, err := req.Accept(ctx, cm.Options{
			PD: server.pd, SendCQ: server.cq, RecvCQ: server.cq,
			Access:      verbs.AccessRemoteRead,
			PrivateData: cm.EncodeDescs([]cm.MRDesc{cm.DescOf(server.mr)}),
		})
		if err != nil {
			log.Fatal(err)
		}
		accepted <- conn
	}()

	// Client.
	client := setup("loop://cm-example/client")
	defer client.dev.Close()
	conn, err := cm.Dial(ctx, client.dev, l.Addr(), cm.Options{
		PD: client.pd, SendCQ: client.cq, RecvCQ: client.cq,
		PrivateData: []byte("hello"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	serverConn := <-accepted
	defer serverConn.Close()

	descs, err := cm.DecodeDescs(conn.PeerPrivateData())
	if err != nil {
		log.Fatal(err)
	}
	buf := descs[0]
	fmt.Printf("client: connected to %s, buffer of %d bytes\n", conn.PeerAddress(), buf.Len)

	err = conn.QP().PostSend([]verbs.SendWR{{
		Opcode:     verbs.OpRead,
		Flags:      verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: client.mr.Addr(), Length: 30, LKey: client.mr.LKey()}},
		RemoteAddr: buf.Addr,
		RKey:       buf.RKey,
	}})
	if err != nil {
		log.Fatal(err)
	}
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctx, client.cq, wc, verbs.PollAdaptive); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("client: %v %v %q\n", wc[0].Status, wc[0].Opcode, client.mr.Bytes()[:30])
	// Output:
	// server: request from loop://cm-example/client saying "hello"
	// client: connected to loop://cm-example/server, buffer of 4096 bytes
	// client: SUCCESS RDMA_READ "the server's registered memory"
}
