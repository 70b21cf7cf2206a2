package memnode_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() { remotedev.Role("memnode-client", runKilledClient) }

// runKilledClient dials the server at arg over tcp, WRITEs to its region,
// says "ready" and waits to be killed.
func runKilledClient(arg string) int {
	dev, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(16)
	mr, _ := pd.AllocMR(64, verbs.AccessLocalWrite)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := cm.Dial(ctx, dev, arg, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	descs, err := cm.DecodeDescs(conn.PeerPrivateData())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wr := verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}, RemoteAddr: descs[0].Addr, RKey: descs[0].RKey}
	if err := conn.QP().PostSend([]verbs.SendWR{wr}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); err != nil || wc[0].Status != verbs.StatusSuccess {
		fmt.Fprintln(os.Stderr, "WRITE:", wc[0].Status, err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

// TestKilledClientsAreFreed: clients SIGKILLed while connected (holding a
// QP, a CQ, receive buffers and a goroutine of the server's) are found
// gone by the probe and freed; the server goes on serving others.
func TestKilledClientsAreFreed(t *testing.T) {
	s := start(t, memnode.Config{Device: "tcp://127.0.0.1:0", Memory: 64 << 10, Probe: 5 * time.Millisecond, Recv: 4})
	const n = 4
	for i := range n {
		c, err := remotedev.StartChild("memnode-client", s.Info().CM)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("ready"); err != nil {
			c.Kill(5 * time.Second)
			t.Fatalf("client %d: %v", i, err)
		}
		waitFor(t, "the client to be tracked", func() bool { return s.Stats().Clients == 1 })
		if err := c.Kill(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the killed client to be freed", func() bool { st := s.Stats(); return st.Clients == 0 && st.Departed == uint64(i+1) })
	}
	c, err := dial(t, "tcp://127.0.0.1:0", s.Info().CM, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if st := c.do(t, verbs.OpWrite, 8); st != verbs.StatusSuccess {
		t.Fatalf("WRITE after the kills: %v", st)
	}
}
