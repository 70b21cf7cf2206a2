package stores_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
)

// TestDial: clients from Dial reach a memnode-served node of every
// design (Smart-HT through its runtime's connections, PRISM-KV also with
// a connection per slot), see each other's PUTs, and close cleanly; a
// wrong token or an unknown design is an error.
func TestDial(t *testing.T) {
	ctx := context.Background()
	for _, name := range append(stores.Designs, "prism-kv/slot-qps") {
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

