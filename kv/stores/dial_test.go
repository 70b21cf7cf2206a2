package stores_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// TestDial: clients from Dial reach a memnode-served node of every
// design (Smart-HT through its runtime's connections; PRISM-KV and
// Smart-HT also with a connection per slot), see each other's PUTs, and close cleanly; a
// wrong token or an unknown design is an error.
func TestDial(t *testing.T) {
	ctx := context.Background()
	for _, name := range append(stores.Designs, "prism-kv/slot-qps", "smart-ht/slot-qps") {
		t.Run(name, func(t *testing.T) {
			design, slotQPs := strings.CutSuffix(name, "/slot-qps")
			fabric := "loop://stores-dial-" + strings.ReplaceAll(name, "/", "-") + "/"
			srv, err := memnode.Start(ctx, memnode.Config{Device: fabric + "node", CM: "127.0.0.1:0", Token: "secret",
				NewService: stores.Service(design, 1000, 64), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r, err := stores.Dial(ctx, stores.DialConfig{Design: design, Device: fabric + "client", Node: srv.Info().CM, Token: "secret", Clients: 2, SlotQPs: slotQPs})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Clients[0].Put(ctx, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if v, err := r.Clients[1].Get(ctx, []byte("k"), nil); err != nil || string(v) != "v" {
				t.Errorf("GET from the second client: %q, %v", v, err)
			}
			if r.RoundTrips() == 0 {
				t.Error("no round trips counted")
			}
			if _, err := stores.Dial(ctx, stores.DialConfig{Design: design, Device: fabric + "intruder", Node: srv.Info().CM, Token: "wrong", Clients: 1}); !errors.Is(err, kv.ErrUnreachable) {
				t.Errorf("wrong token: %v, want kv.ErrUnreachable", err)
			}
		})
	}
	if _, err := stores.Dial(ctx, stores.DialConfig{Design: "nope", Device: "loop://stores-dial-x/c", Node: "127.0.0.1:1", Clients: 1}); err == nil {
		t.Error("unknown design: no error")
	}
}

// TestDialOutlastsSlowNode: the connections Dial opens (a PRISM-KV
// client's own and, with SlotQPs, its slots') carry the store clients'
// retry budget (ClientTimeout), as ConnectClient's do: a node that answers
// nothing for a second does not cost them their connections. Dial used
// the verbs default (half a second), and kv-peers' loads over shm lost
// their connections with RETRY_EXC_ERR on the loaded machine.
func TestDialOutlastsSlowNode(t *testing.T) {
	ctx := context.Background()
	for _, slotQPs := range []bool{false, true} {
		t.Run(fmt.Sprintf("slot-qps=%v", slotQPs), func(t *testing.T) {
			fabric := fmt.Sprintf("stores-dial-slow-%v", slotQPs)
			srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://" + fabric + "/node", CM: "127.0.0.1:0",
				NewService: stores.Service("prism-kv", 1000, 64), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r, err := stores.Dial(ctx, stores.DialConfig{Design: "prism-kv", Device: "loop://" + fabric + "/client", Node: srv.Info().CM,
				Clients: 1, SlotQPs: slotQPs, Options: stores.ClientOptions{Slots: 2}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			c := r.Clients[0]
			if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			f := loop.Get(fabric)
			f.Pause("node")
			done := make(chan error, 1)
			go func() { done <- c.Put(ctx, []byte("k"), []byte("w")) }()
			time.Sleep(time.Second)
			f.Resume("node")
			if err := <-done; err != nil {
				t.Fatalf("a PUT across a 1 s pause: %v", err)
			}
			if v, err := c.Get(ctx, []byte("k"), nil); err != nil || string(v) != "w" {
				t.Fatalf("after the pause: %q, %v", v, err)
			}
		})
	}
}
