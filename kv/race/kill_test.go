package race_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	kvtest.WriterRole("race-writer", func(ctx context.Context, arg string) (kv.Store, error) {
		design, addr, ok := strings.Cut(arg, ",")
		if !ok {
			return nil, fmt.Errorf("want design,address: %q", arg)
		}
		return dialNode(ctx, addr, clientConfig(design == "smart-ht"))
	}, race.SetHook)
}

// testLease is the lease of the clients of the kill tests: short, so
// that takeovers come quickly.
const testLease = 100 * time.Millisecond

// clientConfig is a RACE (smart false) or Smart-HT client's config for
// the kill tests (Smart-HT without a runtime: its lists go on the
// client's connection).
func clientConfig(smartHT bool) race.ClientConfig {
	cfg := race.ClientConfig{Lease: testLease}
	if smartHT {
		cfg.Cache = race.NewSlotCache(0)
		cfg.Backoff = &smart.BackoffConfig{C0: 4 * time.Microsecond, Dynamic: true}
	}
	return cfg
}

// dialNode connects a client of cfg, on its own tcp device, to the node
// at addr (kvtest.ServeNode's).
func dialNode(ctx context.Context, addr string, cfg race.ClientConfig) (*kvtest.Remote[*race.Client], error) {
	return kvtest.DialNode(ctx, addr, "race", func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (*race.Client, error) {
		return race.NewClient(ctx, pd, qp, cq, cfg)
	})
}

// TestKilledWriters kills writer processes (SIGKILL) while they hold a
// writer count in a subtable (mid-insert), a subtable's split lock, the
// split lock and the directory lock, and a split published but not
// finished, and a few at random points of their writes, into a table
// that healthy clients filled close to splitting. Then the healthy
// clients insert 1000 keys more into the subtables of the dead (the
// locks and counts of the dead expire with their leases), porcupine
// passes on their history, and each Close returns within a second
// (kvtest.KillWriters; KV_KILLS replaces the list of kills).
func TestKilledWriters(t *testing.T) {
	for _, design := range []string{"race", "smart-ht"} {
		t.Run(design, func(t *testing.T) {
			addr, srv := kvtest.ServeNode(t, "race", func(pd verbs.PD) (*race.Server, error) {
				return race.NewServer(pd, race.Config{Depth: 1, Memory: 128 << 20})
			})
			var rs []*kvtest.Remote[*race.Client]
			for range 4 {
				c, err := dialNode(context.Background(), addr, clientConfig(design == "smart-ht"))
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, c)
			}
			cs := kvtest.Stores(rs)
			kvtest.KillWriters(t, cs, kvtest.KillConfig{
				Role: "race-writer", Dial: design + "," + addr,
				Points: []string{race.HookEntered, kvtest.Random, race.HookSplitLocked, race.HookSplitDirLocked, race.HookSplitPublished},
				Fill:   1800,
				// The healthy inserts go to the subtables (at the
				// node's global depth) of writers killed inside one,
				// so that these fill and split.
				Victim: func(point string) bool { return point == race.HookEntered },
				Near: func(key, victim string) bool {
					mask := uint64(1)<<srv.Depth() - 1
					return kv.Hash([]byte(key))&mask == kv.Hash([]byte(victim))&mask
				},
			})
			var splits uint64
			for _, r := range rs {
				splits += r.Store.Splits()
				kvtest.CloseWithin(t, r, time.Second)
			}
			t.Logf("%d splits by the healthy clients, %d subtables", splits, srv.Subtables())
		})
	}
}
