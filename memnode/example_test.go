package memnode_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// Example serves 1 MiB in two regions on an in-process loop fabric, and
// a client WRITEs to the second region and READs it back. Over tcp only
// the device URIs change; `rdmakit node` is this server behind flags.
func Example() {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{
		Device:  "loop://memnode-example/node",
		CM:      "127.0.0.1:0",
		Memory:  1 << 20,
		Regions: 2,
		Token:   "s3cret",
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info() // what `rdmakit node` prints as its JSON line
	fmt.Println(len(info.Regions), "regions of", info.Regions[1].Len, "bytes, access", info.Access)

	// The client: a device, a CQ, a buffer, and cm.Dial with the token.
	dev, err := verbs.Open("loop://memnode-example/client")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(16)
	buf, _ := pd.AllocMR(64, verbs.AccessLocalWrite)
	conn, err := cm.Dial(ctx, dev, info.CM, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq,
		PrivateData: memnode.Hello{Token: "s3cret"}.Marshal()})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	regions, _ := cm.DecodeDescs(conn.PeerPrivateData()) // = info.Regions

	do := func(op verbs.Opcode) verbs.Status {
		wr := verbs.SendWR{Opcode: op, Flags: verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: buf.Addr(), Length: 8, LKey: buf.LKey()}},
			RemoteAddr: regions[1].Addr, RKey: regions[1].RKey}
		if err := conn.QP().PostSend([]verbs.SendWR{wr}); err != nil {
			log.Fatal(err)
		}
		wc := make([]verbs.WC, 1)
		if _, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); err != nil {
			log.Fatal(err)
		}
		return wc[0].Status
	}
	copy(buf.Bytes(), "rdmakit!")
	fmt.Println("WRITE", do(verbs.OpWrite))
	clear(buf.Bytes())
	fmt.Println("READ", do(verbs.OpRead), string(buf.Bytes()[:8]))
	// Output:
	// 2 regions of 524288 bytes, access read,write,atomic
	// WRITE SUCCESS
	// READ SUCCESS rdmakit!
}
