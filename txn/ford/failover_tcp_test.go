package ford_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// nodeRole is a FORD memory node process: its argument is
// "INDEX|MEMBERS" (MEMBERS the membership addresses, comma-separated).
// It serves smallLayout over tcp with its member of the membership,
// says "ready CM-ADDRESS", and runs until its stdin closes or it is
// killed.
const nodeRole = "ford-node"

func init() {
	remotedev.Role(nodeRole, func(arg string) int {
		f := strings.SplitN(arg, "|", 2)
		self, err := strconv.Atoi(f[0])
		if len(f) != 2 || err != nil {
			fmt.Fprintln(os.Stderr, nodeRole+": bad argument", arg)
			return 2
		}
		nd, err := ford.StartNode(context.Background(), ford.NodeConfig{
			Server: memnode.Config{Device: "tcp://127.0.0.1:0", CM: "127.0.0.1:0", Token: "tok", Probe: 100 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler)},
			Layout: smallLayout, Self: self, Members: strings.Split(f[1], ","),
			Silence: failSilence, ConfigLease: failConfigLease, Lease: failLease, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Fprintln(os.Stderr, nodeRole+":", err)
			return 1
		}
		fmt.Println("ready", nd.Server().Info().CM)
		var b [1]byte
		os.Stdin.Read(b[:]) // until the test closes it
		nd.Close()
		return 0
	})
}

// TestPrimaryFailoverTCP is TestPrimaryFailover with each memory node a
// process of its own over the tcp transport, node 0 killed (-9): its
// backup takes over, SmallBank goes on, nothing acknowledged is lost,
// the money adds up and the history is serializable.
// FORD_FAILOVER_TCP=1 runs it (it starts processes).
func TestPrimaryFailoverTCP(t *testing.T) {
	if os.Getenv("FORD_FAILOVER_TCP") == "" {
		t.Skip("FORD_FAILOVER_TCP=1 runs it (starts processes)")
	}
	var members []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, ln.Addr().String())
		ln.Close() // the children listen there
	}
	var addrs []string
	var children []*remotedev.Child
	for i := range 3 {
		child, err := remotedev.StartChild(nodeRole, strconv.Itoa(i)+"|"+strings.Join(members, ","))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { child.CloseInput(); child.Process().Kill(); <-child.Exited() })
		f, err := child.Expect("ready")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, f[0])
		children = append(children, child)
	}
	b := &fbed{t: t, addrs: addrs, members: members}
	dial := func() *ford.DB {
		return b.dbWith(ford.Config{Device: "tcp://127.0.0.1:0?token=tok", Nodes: addrs, Members: members, Token: "tok", Layout: smallLayout, Lease: failLease})
	}
	ctx := tctx(t)
	failoverRun(t, ctx, []*ford.DB{dial(), dial()}, func() {
		if err := children[0].Process().Kill(); err != nil {
			t.Fatal(err)
		}
	}, nil)
}
