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

// TestTCP: the memory node in its own process, clients here over tcp;
// the linearizability run (smaller) and a scan.
func TestTCP(t *testing.T) {
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
	dev, err := verbs.Open("tcp://127.0.0.1:0?token=t") // memnode gives its device the token
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{nodes: []memnode.Info{{CM: f[0]}}, dev: dev, pd: pd}
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
	if it.Err() != nil || n == 0 || n > 48 {
		t.Fatalf("scan: %d keys: %v", n, it.Err())
	}
}
