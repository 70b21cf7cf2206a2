package kvtest_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestShmNodeStopped stops the node's process (SIGSTOP) while 8 tasks
// GET from it over shm with a connection per slot, as kv-peers runs
// them. GETs that the client serves from mapped memory may go on; those
// that wait for the node must fail once their retry budget runs out, and
// the failure must end every GET in flight: none may wait for the node
// beyond a few seconds (kv-peers once found GETs waiting for good after
// the client's first RETRY_EXC_ERR).
func TestShmNodeStopped(t *testing.T) {
	for _, design := range []string{"prism-kv", "smart-ht"} {
		t.Run(design, func(t *testing.T) { testShmNodeStopped(t, design) })
	}
}

func testShmNodeStopped(t *testing.T, design string) {
	base := fmt.Sprintf("shm://kvtest-stop-%d-%s", os.Getpid(), design)
	c, err := remotedev.StartChild("kv-node", design+","+base+"-node")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Process().Signal(syscall.SIGCONT)
		_ = c.CloseInput()
		_ = c.Wait(5 * time.Second)
	}()
	f, err := c.Expect("ready")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := stores.Dial(ctx, stores.DialConfig{Design: design, Device: base + "-client", Node: f[0], Clients: 1, SlotQPs: true,
		Options: stores.ClientOptions{Poll: verbs.PollAdaptive, Slots: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := r.Clients[0]
	for i := range 200 {
		if err := s.Put(ctx, []byte(fmt.Sprintf("k%d", i)), make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var stopped atomic.Bool
	var oks, fails atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := 0; runCtx.Err() == nil; i++ {
				var err error
				buf, err = s.Get(ctx, []byte(fmt.Sprintf("k%d", (i*7+g)%200)), buf[:0])
				if err == nil {
					oks.Add(1)
					continue
				}
				if !stopped.Load() {
					t.Errorf("GET failed before the node stopped: %v", err)
				}
				fails.Add(1)
				return
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := c.Process().Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped.Store(true)
	time.Sleep(100 * time.Millisecond)
	stop() // the tasks end after the GET under way
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatalf("GETs still waiting 10 s after the node stopped (%d ok, %d failed)", oks.Load(), fails.Load())
	}
	t.Logf("%d GETs ok, %d failed once the node stopped", oks.Load(), fails.Load())
}
