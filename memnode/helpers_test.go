package memnode_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"

	_ "github.com/rdmakit/rdmakit/transport/loop"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
)

var fabrics atomic.Int64

// loopURI returns a device URI on a loop fabric of the test's own.
func loopURI(t *testing.T, node string) string {
	return fmt.Sprintf("loop://memnode-%d/%s", fabrics.Add(1), node)
}

// start starts a server and closes it when the test ends.
func start(t *testing.T, cfg memnode.Config) *memnode.Server {
	t.Helper()
	if cfg.CM == "" {
		cfg.CM = "127.0.0.1:0"
	}
	if cfg.Logger == nil && !testing.Verbose() {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := memnode.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is a client of a server.
type client struct {
	dev   verbs.Device
	cq    verbs.CQ
	mr    verbs.MR
	conn  *cm.Conn
	descs []cm.MRDesc
}

// dial opens a client device at uri and connects it to the server at
// cmAddr with private data hello; it returns the error of cm.Dial.
func dial(t *testing.T, uri, cmAddr string, hello []byte) (*client, error) {
	t.Helper()
	c := &client{}
	var err error
	if c.dev, err = verbs.Open(uri); err != nil {
		t.Fatal(err)
	}
	pd, err := c.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if c.cq, err = c.dev.CreateCQ(64); err != nil {
		t.Fatal(err)
	}
	if c.mr, err = pd.AllocMR(4096, verbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.conn, err = cm.Dial(ctx, c.dev, cmAddr, cm.Options{PD: pd, SendCQ: c.cq, RecvCQ: c.cq, PrivateData: hello}); err != nil {
		c.dev.Close()
		return nil, err
	}
	if c.descs, err = cm.DecodeDescs(c.conn.PeerPrivateData()); err != nil {
		t.Fatal(err)
	}
	return c, nil
}

// close closes the client's connection and device: the client departs.
func (c *client) close() {
	c.conn.Close()
	c.dev.Close()
}

// do posts one signaled request of n bytes at offset 0 of the client's
// buffer and of region 0, and returns its completion status.
func (c *client) do(t *testing.T, op verbs.Opcode, n uint32) verbs.Status {
	t.Helper()
	wr := verbs.SendWR{ID: 7, Opcode: op, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: c.mr.Addr(), Length: n, LKey: c.mr.LKey()}},
		RemoteAddr: c.descs[0].Addr, RKey: c.descs[0].RKey}
	if err := c.conn.QP().PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctx, c.cq, wc, verbs.PollAdaptive); err != nil {
		t.Fatal(err)
	}
	return wc[0].Status
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// goroutinesBackTo waits until the process has at most n goroutines.
func goroutinesBackTo(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > n; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
