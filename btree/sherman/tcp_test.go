package sherman_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// nodeRole is a memory node process over tcp: it says "ready CM" and
// serves until its stdin closes.
const nodeRole = "sherman-node"

func init() {
	remotedev.Role(nodeRole, func(string) int {
		srv, err := memnode.Start(context.Background(), memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0",
			Memory: 16 << 20, Regions: 1, Token: "t", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Fprintln(os.Stderr, nodeRole+":", err)
			return 1
		}
		fmt.Println("ready", srv.Info().CM)
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Close()
		return 0
	})
}

// tcpNode starts a memory node process and returns a bed whose client
// device (tcp, in this process) reaches it.
func tcpNode(t testing.TB) *bed {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a process")
	}
	child, err := remotedev.StartChild(nodeRole, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.CloseInput(); child.Wait(5 * time.Second) })
	f, err := child.Expect("ready")
	if err != nil {
		t.Fatal(err)
	}
	dev, pd := tcpDevice(t)
	return &bed{nodes: []memnode.Info{{CM: f[0]}}, dev: dev, pd: pd}
}

// tcpDevice opens a tcp client device (memnode gives its own device
// the token "t": the client's must match).
func tcpDevice(t testing.TB) (verbs.Device, verbs.PD) {
	dev, err := verbs.Open("tcp://127.0.0.1:0?token=t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return dev, pd
}

// TestTCP: the memory node in its own process, clients here over tcp;
// the linearizability run (smaller) and a scan.
func TestTCP(t *testing.T) {
	b := tcpNode(t)
	ops := 4000
	if long() {
		ops = 40000
	}
	runLinear(t, b, 4, 4, ops, 48, sherman.Config{Layout: small}, nil)
	c := b.client(t, sherman.Config{Layout: small})
	it := c.Scan(context.Background(), nil, nil, 0)
	n := 0
	for it.Next() {
		n++
	}
	if it.Err() != nil || n < 20 {
		t.Fatalf("scan: %d keys: %v", n, it.Err())
	}
}

// victimRole is a client process (argument: the node's CM address)
// that stops holding a leaf's lock, says "stopped" and waits to be
// killed.
const victimRole = "sherman-victim"

// killLease is the lease of the kill test's clients.
const killLease = 200 * time.Millisecond

func init() {
	remotedev.Role(victimRole, func(cmAddr string) int {
		dev, err := verbs.Open("tcp://127.0.0.1:0?token=t")
		if err != nil {
			fmt.Println("done", err)
			return 1
		}
		pd, err := dev.AllocPD()
		if err != nil {
			fmt.Println("done", err)
			return 1
		}
		conns, _, err := dialConns(dev, pd, []memnode.Info{{CM: cmAddr}}, 4)
		if err != nil {
			fmt.Println("done", err)
			return 1
		}
		c, err := sherman.Open(context.Background(), pd, conns, sherman.Config{Layout: small, Lease: killLease, Slots: 4})
		if err != nil {
			fmt.Println("done", err)
			return 1
		}
		sherman.SetTestHook(func(p string) error {
			if p == sherman.HookLocked {
				fmt.Println("stopped")
				select {} // until killed
			}
			return nil
		})
		err = c.Put(context.Background(), []byte("k"), []byte("victim"))
		fmt.Println("done", err)
		return 1
	})
}

// TestKilledHolder: a client process is killed holding a leaf's lock;
// a client here takes the lock over after the lease and writes.
func TestKilledHolder(t *testing.T) {
	b := tcpNode(t)
	ctx := context.Background()
	c := b.client(t, sherman.Config{Layout: small, Lease: killLease})
	if err := c.Put(ctx, []byte("k"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	victim, err := remotedev.StartChild(victimRole, b.nodes[0].CM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Expect("stopped"); err != nil {
		victim.Kill(time.Second)
		t.Fatal(err)
	}
	if err := victim.Kill(5 * time.Second); err != nil {
		t.Log("kill:", err)
	}
	if err := c.Put(ctx, []byte("k"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, []byte("k"), nil); err != nil || string(v) != "1" {
		t.Fatalf("get: %q %v", v, err)
	}
	if st := c.Stats(); st.TakeOvers != 1 {
		t.Fatalf("take-overs: %+v", st)
	}
}
