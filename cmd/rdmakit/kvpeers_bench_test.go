package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench"
)

// TestKVPeersExperiment runs kv-peers in its quick form: every store
// node is this test binary re-run as `rdmakit kv serve`, over tcp and
// over shm. The rdmakit rows carry a batch (requests per write over tcp,
// "loads" over shm) and the node's CPU per operation; no node outlives
// the run.
func TestKVPeersExperiment(t *testing.T) {
	res := runExperiment(t, "kv-peers", "--quick", "--duration", "30ms")
	col := res.col
	seen := map[string]bool{}
	for _, r := range res.rows {
		sys, transport := r[col["system"]].(string), r[col["transport"]].(string)
		if sys != "prism-kv" && sys != "smart-ht" {
			continue
		}
		seen[sys+" "+transport] = true
		if rate, ok := r[col["rate"]].(float64); !ok || rate <= 0 {
			t.Errorf("%s over %s: no rate: %v", sys, transport, r)
		}
		if _, ok := r[col["server_cpu"]].(float64); !ok {
			t.Errorf("%s over %s: no server CPU: %v", sys, transport, r)
		}
		batch := r[col["batch"]]
		if transport == "shm" && batch != "loads" {
			t.Errorf("%s over shm: batch %v, want loads", sys, batch)
		}
		if n, ok := batch.(float64); transport == "tcp" && (!ok || n < 1) {
			t.Errorf("%s over tcp: batch %v, want requests per write", sys, batch)
		}
	}
	for _, want := range []string{"prism-kv tcp", "prism-kv shm", "smart-ht tcp", "smart-ht shm"} {
		if !seen[want] {
			t.Errorf("no %s row:\n%s", want, res.out)
		}
	}
	// The nodes are stopped before the run returns.
	for deadline := time.Now().Add(5 * time.Second); ; {
		kids := children()
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// children lists this process's child processes (pid and command), from
// /proc (none without /proc).
func children() []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	var kids []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == me {
			kids = append(kids, s[:i+1])
		}
	}
	return kids
}

// TestKVPeersCancelled: a kv-peers run whose context ends midway returns
// an error and leaves no server process behind.
func TestKVPeersCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var most atomic.Int64 // children seen at once during the run
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(len(children())); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	_, _, err := bench.Run(ctx, "kv-peers", bench.Options{Quick: true, Duration: 2 * time.Second, Command: selfCommand})
	close(stop)
	<-sampled
	if err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	if most.Load() == 0 {
		t.Skip("no /proc, or the run ended before it started a server")
	}
	t.Logf("cancelled with up to %d servers running: %v", most.Load(), err)
	for deadline := time.Now().Add(5 * time.Second); ; {
		kids := children()
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
