package race_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/smart"
)

func init() { remotedev.Role("race-writer", runWriter) }

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

// runWriter is a child that inserts keys into the node at its argument's
// address ("design,address,point"): from one goroutine until a hook
// point named point stops it there (it says "stopped" and waits to be
// killed, holding what the point holds), or, with point "random", from
// four goroutines until it is killed.
func runWriter(arg string) int {
	parts := strings.Split(arg, ",")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "race-writer: want design,address,point")
		return 2
	}
	design, addr, point := parts[0], parts[1], parts[2]
	race.SetHook(func(p string) {
		if p == point {
			fmt.Println("stopped", p)
			time.Sleep(time.Hour) // hold it until killed
		}
	})
	ctx := context.Background()
	c, err := dialNode(ctx, addr, clientConfig(design == "smart-ht"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "race-writer:", err)
		return 1
	}
	fmt.Println("ready")
	writers := 1
	if point == "random" {
		writers = 4
	}
	for g := range writers {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("w%d-%d-%d", os.Getpid(), g, i)
				if err := c.Put(ctx, []byte(key), []byte("v")); err != nil {
					fmt.Fprintln(os.Stderr, "race-writer:", err)
					os.Exit(1)
				}
			}
		}()
	}
	time.Sleep(time.Hour)
	return 0
}

// killWriter starts a writer child for point and kills it (SIGKILL) once
// it stopped there, or for "random" a few milliseconds into its inserts.
// It returns the first key the child wrote (where "entered" stops it).
func killWriter(t *testing.T, design, addr, point string) string {
	t.Helper()
	c, err := remotedev.StartChild("race-writer", design+","+addr+","+point)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(5 * time.Second)
	if _, err := c.Expect("ready"); err != nil {
		t.Fatalf("writer for %s: %v", point, err)
	}
	if point == "random" {
		time.Sleep(time.Duration(5+rand.IntN(40)) * time.Millisecond)
	} else if _, err := c.Expect("stopped " + point); err != nil {
		t.Fatalf("writer for %s: %v", point, err)
	}
	if err := c.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("w%d-0-0", c.Process().Pid)
}

// TestKilledWriters kills writer processes (SIGKILL) while they hold a
// writer count in a subtable (mid-insert), a subtable's split lock, the
// split lock and the directory lock, and a split published but not
// finished, and a few at random points of their inserts, into a table
// that healthy clients filled close to splitting. Then the healthy
// clients insert n keys more, each within its timeout (the locks and
// counts of the dead expire with their leases), porcupine passes on
// their history, and each Close returns within a second.
// RACE_KILLS, a comma-separated list of hook points and "random",
// replaces the list of kills.
func TestKilledWriters(t *testing.T) {
	kills := []string{race.HookEntered, "random", race.HookSplitLocked, race.HookSplitDirLocked, race.HookSplitPublished}
	if v := os.Getenv("RACE_KILLS"); v != "" {
		kills = strings.Split(v, ",")
	}
	for _, design := range []string{"race", "smart-ht"} {
		t.Run(design, func(t *testing.T) {
			node, srv := serveNode(t, race.Config{Depth: 1, Memory: 128 << 20})
			addr := node.Info().CM
			ctx := context.Background()
			var cs []kv.Store
			for range 4 {
				c, err := dialNode(ctx, addr, clientConfig(design == "smart-ht"))
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c)
			}
			start := time.Now()
			// insert has the clients insert n keys named name-i; with
			// victims, only keys whose directory index (at the node's
			// global depth) is one of theirs, so that their subtables
			// fill and split.
			insert := func(name string, n int, victims []string) []string {
				var mu sync.Mutex
				var keys []string
				mask := uint64(1)<<srv.Depth() - 1
				var wg sync.WaitGroup
				for ci, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i, j := ci, 0; i < n; i += len(cs) {
							key := fmt.Sprintf("%s-%d-%d", name, ci, j)
							for ; len(victims) > 0 && kv.Hash([]byte(key))&mask != kv.Hash([]byte(victims[i%len(victims)]))&mask; j++ {
								key = fmt.Sprintf("%s-%d-%d", name, ci, j)
							}
							j++
							ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
							err := c.Put(ctx, []byte(key), []byte("v"))
							cancel()
							if err != nil {
								t.Errorf("%s insert %d: %v", name, i, err)
								return
							}
							mu.Lock()
							keys = append(keys, key)
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				t.Logf("%v: %d %s inserts done, %d subtables", time.Since(start).Round(time.Millisecond), n, name, srv.Subtables())
				return keys
			}
			insert("fill", 1800, nil)
			var victims []string // the first keys of writers killed inside a subtable
			for _, point := range kills {
				key := killWriter(t, design, addr, point)
				if point == race.HookEntered {
					victims = append(victims, key)
				}
				t.Logf("%v: writer killed at %s", time.Since(start).Round(time.Millisecond), point)
			}
			keys := insert("healthy", 1000, victims)
			for _, key := range keys {
				if v, err := cs[0].Get(ctx, []byte(key), nil); err != nil || string(v) != "v" {
					t.Fatalf("%s: %q, %v", key, v, err)
				}
			}
			kvtest.Linearizable(t, cs, kvtest.LinConfig{Ops: 800, Keys: 16})
			t.Logf("%v: checked", time.Since(start).Round(time.Millisecond))
			var splits uint64
			for _, c := range cs {
				splits += c.(*remoteClient).Splits()
				kvtest.CloseWithin(t, c, time.Second)
			}
			t.Logf("%d splits by the healthy clients", splits)
		})
	}
}
