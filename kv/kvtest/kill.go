package kvtest

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
)

// The kill tests: writer processes are killed (SIGKILL) in the middle of
// their writes, holding whatever a store's writer holds at that moment
// (a lock, a count, a reserved ring slot, an RPC the node runs), and
// healthy clients must go on: insert, read back, pass porcupine and
// close. Every store runs the same test (KillWriters) with its own kill
// points.

// Random is the kill point of a writer killed a few milliseconds into
// its writes, wherever they are, from four goroutines.
const Random = "random"

// heldPoint is what a writer child is told when the node holds its
// request (KillConfig.Hold): no hook of any store is named so, so it
// writes on until killed.
const heldPoint = "node-held"

// WriterRole registers role, a writer child (call it from an init
// function of a test file; the package's TestMain must be
// remotedev.TestMain). Its argument is "point,dial": it makes a client
// with dial(ctx, dial), says "ready", and writes keys of its own — PUTs,
// and a DELETE of the key before every fourth — from one goroutine until
// it is killed. setHook, when not nil, installs the store's test hook:
// when the writer reaches point it says "stopped point" and waits to be
// killed, holding what the point holds. With point Random it writes from
// four goroutines.
func WriterRole(role string, dial func(ctx context.Context, arg string) (kv.Store, error), setHook func(func(point string))) {
	remotedev.Role(role, func(arg string) int {
		point, rest, ok := strings.Cut(arg, ",")
		if !ok {
			fmt.Fprintln(os.Stderr, role+": want point,dial")
			return 2
		}
		if setHook != nil {
			setHook(func(p string) {
				if p == point {
					fmt.Println("stopped", p)
					time.Sleep(time.Hour) // hold it until killed
				}
			})
		}
		ctx := context.Background()
		s, err := dial(ctx, rest)
		if err != nil {
			fmt.Fprintln(os.Stderr, role+":", err)
			return 1
		}
		fmt.Println("ready")
		writers := 1
		if point == Random {
			writers = 4
		}
		for g := range writers {
			go func() {
				for i := 0; ; i++ {
					key := []byte(WriterKey(os.Getpid(), g, i))
					err := s.Put(ctx, key, []byte("v"))
					if err == nil && i%4 == 3 {
						err = s.Delete(ctx, []byte(WriterKey(os.Getpid(), g, i-1)))
					}
					if err != nil {
						fmt.Fprintln(os.Stderr, role+":", err)
						os.Exit(1)
					}
				}
			}()
		}
		time.Sleep(time.Hour)
		return 0
	})
}

// WriterKey is the i-th key the writer goroutine g of process pid puts.
func WriterKey(pid, g, i int) string { return fmt.Sprintf("w%d-%d-%d", pid, g, i) }

// KillConfig is one store's kill test.
type KillConfig struct {
	// Role is the writer children's role (WriterRole) and Dial the
	// argument their dial gets: how they reach the node.
	Role, Dial string
	// Points are where writers are killed, one writer each, in order:
	// the store's hook points, points the node holds (Hold), or Random.
	// KV_KILLS (comma-separated) replaces them.
	Points []string
	// Hold, when set, arms a hold in the node for a point that is the
	// node's, not the writer's (ok true): held is closed once the node
	// holds one of a writer's requests, and release, called once the
	// writer is dead, lets the node go on with it.
	Hold func(point string) (held <-chan struct{}, release func(), ok bool)
	// Fill is how many keys the healthy clients insert before the kills.
	Fill int
	// Inserts is how many they insert after (default 1000), every one
	// within OpTimeout (default 5 s).
	Inserts   int
	OpTimeout time.Duration
	// Victim says whether the first key of a writer killed at point is a
	// victim, and Near whether a key is near one (the same subtable, the
	// same lock): the healthy inserts then take only keys near a victim,
	// so that they meet what the dead writers hold.
	Victim func(point string) bool
	Near   func(key, victim string) bool
	// NearEvery, when above 1, has only every NearEvery-th insert take a
	// key near a victim (a store whose neighbours cost a probe each).
	NearEvery int
	// Lin is the porcupine run after the inserts (default 800 operations
	// on 16 keys, 5% of them cancelled within 300 µs: a tcp round trip).
	Lin LinConfig
}

// KillWriters runs a kill test on the healthy clients cs: they insert
// cfg.Fill keys, writers are killed at cfg.Points, then the healthy
// clients insert cfg.Inserts keys more (each within its timeout: what
// the dead held must expire or be taken over), read every one back, and
// pass porcupine. The caller closes cs (CloseWithin). KV_KILL_LONG=1 adds
// twelve random kills and ten times the operations.
func KillWriters(t *testing.T, cs []kv.Store, cfg KillConfig) {
	t.Helper()
	if v := os.Getenv("KV_KILLS"); v != "" {
		cfg.Points = strings.Split(v, ",")
	}
	if cfg.Inserts <= 0 {
		cfg.Inserts = 1000
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	if cfg.Lin.Ops <= 0 {
		cfg.Lin.Ops = 800
	}
	if cfg.Lin.Keys <= 0 {
		cfg.Lin.Keys = 16
	}
	if cfg.Lin.Cancel == 0 {
		cfg.Lin.Cancel, cfg.Lin.CancelWithin = 0.05, 300*time.Microsecond
	}
	if os.Getenv("KV_KILL_LONG") != "" {
		for range 12 {
			cfg.Points = append(cfg.Points, Random)
		}
		cfg.Inserts *= 10
		cfg.Lin.Ops *= 10
	}
	start := time.Now()
	ctx := context.Background()
	insert := func(name string, n int, victims []string) []string {
		var mu sync.Mutex
		var keys []string
		var wg sync.WaitGroup
		for ci, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, j := ci, 0; i < n; i += len(cs) {
					key := fmt.Sprintf("%s-%d-%d", name, ci, j)
					near := len(victims) > 0 && (cfg.NearEvery <= 1 || i%cfg.NearEvery == 0)
					for ; near && !cfg.Near(key, victims[i%len(victims)]); j++ {
						key = fmt.Sprintf("%s-%d-%d", name, ci, j)
					}
					j++
					ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
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
		t.Logf("%v: %d %s inserts done", time.Since(start).Round(time.Millisecond), n, name)
		return keys
	}
	if cfg.Fill > 0 {
		insert("fill", cfg.Fill, nil)
	}
	var victims []string
	for _, point := range cfg.Points {
		key := killWriter(t, cfg, point)
		if cfg.Victim != nil && cfg.Victim(point) {
			victims = append(victims, key)
		}
		t.Logf("%v: writer killed at %s", time.Since(start).Round(time.Millisecond), point)
	}
	keys := insert("healthy", cfg.Inserts, victims)
	if t.Failed() {
		return
	}
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		v, err := cs[0].Get(ctx, []byte(key), nil)
		cancel()
		if err != nil || string(v) != "v" {
			t.Fatalf("%s: %q, %v", key, v, err)
		}
	}
	Linearizable(t, cs, cfg.Lin)
	t.Logf("%v: checked", time.Since(start).Round(time.Millisecond))
}

// killWriter starts a writer child for point and kills it (SIGKILL) once
// it stopped there, once the node holds its request, or for Random a few
// milliseconds into its writes. It returns the first key the child puts
// (the one a hook point of its first PUT stops it in).
func killWriter(t *testing.T, cfg KillConfig, point string) string {
	t.Helper()
	var held <-chan struct{}
	var release func()
	told := point
	if cfg.Hold != nil {
		if h, r, ok := cfg.Hold(point); ok {
			held, release, told = h, r, heldPoint
		}
	}
	c, err := remotedev.StartChild(cfg.Role, told+","+cfg.Dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill(5 * time.Second)
	if _, err := c.Expect("ready"); err != nil {
		t.Fatalf("writer for %s: %v", point, err)
	}
	switch {
	case held != nil:
		select {
		case <-held:
		case <-c.Exited():
			t.Fatalf("writer for %s exited before the node held its request", point)
		case <-time.After(remotedev.LineTimeout):
			t.Fatalf("the node held no request of the writer for %s", point)
		}
	case point == Random:
		time.Sleep(time.Duration(5+rand.IntN(40)) * time.Millisecond)
	default:
		if _, err := c.Expect("stopped " + point); err != nil {
			t.Fatalf("writer for %s: %v", point, err)
		}
	}
	if err := c.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if release != nil {
		release()
	}
	return WriterKey(c.Process().Pid, 0, 0)
}
