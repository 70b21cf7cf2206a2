package kvtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	_ "github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() { remotedev.Role("kv-node", runKVNode) }

// runKVNode serves a store node of 10,000 keys ("design,device") on
// memnode and says "ready <cm address>"; it exits when its stdin closes.
func runKVNode(arg string) int {
	design, dev, ok := strings.Cut(arg, ",")
	if !ok {
		fmt.Fprintln(os.Stderr, "kv-node: want design,device")
		return 2
	}
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: dev, CM: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler), NewService: stores.Service(design, 10000, 64)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kv-node:", err)
		return 1
	}
	defer srv.Close()
	fmt.Println("ready", srv.Info().CM)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// TestShmGetTail (KV_SHM_TAIL=design, e.g. smart-ht) measures the GET
// latency tail over shm with the node in its own process, as kv-peers
// runs it: 8 goroutines (KV_SHM_TASKS) share one client (event polling or
// KV_SHM_POLL=adaptive; 64 slots or KV_SHM_SLOTS; a connection per slot
// with KV_SHM_SLOTQPS=1) and GET 1,000 keys 30,000 times each, every GET
// bounded by 5 s (with KV_SHM_CANCEL=1 every tenth by 0–6 µs instead, so
// that some are cancelled in flight) (one that runs out dumps every goroutine's stack: the
// probe for GETs that waited in CQ.Wait for good); it logs the rate,
// p50, p99 and how many GETs took each whole number of milliseconds past
// the first. It fails only when a GET fails or runs out of its 5 s (the
// latency figures depend on the machine's load): it is the probe for
// docs/kv.md's ~10 ms stalls.
func TestShmGetTail(t *testing.T) {
	design := os.Getenv("KV_SHM_TAIL")
	if design == "" {
		t.Skip("KV_SHM_TAIL=design runs it")
	}
	base := fmt.Sprintf("shm://kvtest-tail-%d", os.Getpid())
	c, err := remotedev.StartChild("kv-node", design+","+base+"-node")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CloseInput(); _ = c.Wait(5 * time.Second) }()
	f, err := c.Expect("ready")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	poll := verbs.PollEvent
	if os.Getenv("KV_SHM_POLL") == "adaptive" {
		poll = verbs.PollAdaptive
	}
	slotQPs := os.Getenv("KV_SHM_SLOTQPS") != ""
	tasks := 8
	if n, err := strconv.Atoi(os.Getenv("KV_SHM_TASKS")); err == nil && n > 0 {
		tasks = n
	}
	slots := 64
	if n, err := strconv.Atoi(os.Getenv("KV_SHM_SLOTS")); err == nil && n > 0 {
		slots = n
	}
	r, err := stores.Dial(ctx, stores.DialConfig{Design: design, Device: base + "-client", Node: f[0], Clients: 1, SlotQPs: slotQPs,
		Options: stores.ClientOptions{Poll: poll, Slots: slots}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := r.Clients[0]
	for i := range 1000 {
		if err := s.Put(ctx, []byte(fmt.Sprintf("k%d", i)), make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	cancelSome := os.Getenv("KV_SHM_CANCEL") != ""
	var dumped sync.Once
	for g := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 30000)
			var buf []byte
			var err error
			for i := range 30000 {
				t0 := time.Now()
				bound := 5 * time.Second
				if cancelSome && i%10 == 3 {
					bound = time.Duration(i%7) * time.Microsecond // cut short, often mid-flight
				}
				gctx, cancel := context.WithTimeout(ctx, bound)
				buf, err = s.Get(gctx, []byte(fmt.Sprintf("k%d", (i*7+g)%1000)), buf[:0])
				cancel()
				if cancelSome && bound < time.Second && err != nil && errors.Is(err, context.DeadlineExceeded) {
					err = nil // cut short on purpose
				}
				mine = append(mine, time.Since(t0))
				if errors.Is(err, context.DeadlineExceeded) {
					dumped.Do(func() { _ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2) })
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	hist := map[int]int{}
	for _, l := range lat {
		if l > time.Millisecond {
			hist[int(l/time.Millisecond)]++
		}
	}
	t.Logf("%s: %d GETs in %v (%.0f/s), p50 %v, p99 %v, max %v; GETs over 1 ms by whole ms: %v", design, len(lat), el.Round(time.Millisecond),
		float64(len(lat))/el.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], hist)
}
