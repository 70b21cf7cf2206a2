package stores_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/internal/stallproxy"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestServiceFreesDepartedClients serves a RACE node on memnode and
// connects and disconnects Smart-HT and RACE clients, 210 of them, each
// putting and deleting a key: the server tracks no client once they are
// gone, the node's free memory is back where it started (each client
// gives back its chunk as it closes: the node used to be full after 64),
// and a client of another layout or without the token is refused.
func TestServiceFreesDepartedClients(t *testing.T) {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://stores-service/node", CM: "127.0.0.1:0", Token: "t", Metrics: "127.0.0.1:0",
		Probe: 2 * time.Millisecond, NewService: stores.Service("smart-ht", 1000, 64), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.Info().Service != "race" {
		t.Errorf("service %q, want race", srv.Info().Service)
	}
	dial := func(i int, hello memnode.Hello) (verbs.Device, *cm.Conn, verbs.CQ, verbs.PD, error) {
		dev, err := verbs.Open(fmt.Sprintf("loop://stores-service/c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(4096)
		conn, err := cm.Dial(ctx, dev, srv.Info().CM, cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, Cap: stores.QPCap,
			Access: verbs.AccessAll, MinRNRTimer: stores.ClientMinRNR, RNRRetry: stores.ClientRNRRetry, PrivateData: hello.Marshal()})
		if err != nil {
			dev.Close()
		}
		return dev, conn, cq, pd, err
	}
	memFree := `rdmakit_kv_memory_free_bytes{store="race"}`
	free0 := scrape(t, srv.Info().Metrics)[memFree]
	const cycles = 210
	for i := range cycles {
		design := []string{"race", "smart-ht"}[i%2]
		dev, conn, cq, pd, err := dial(i, memnode.Hello{Service: design, Token: "t"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := stores.NewClient(ctx, design, pd, conn.QP(), cq, stores.ClientOptions{})
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		key := []byte(fmt.Sprintf("k%d", i))
		if err := c.Put(ctx, key, []byte("v")); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if err := c.Delete(ctx, key); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		c.Close()
		conn.Close()
		dev.Close()
	}
	// Clients alone could read 0 before the node tracked the last one.
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().Clients > 0 || srv.Stats().Departed < cycles; {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: departed clients still tracked", srv.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := srv.Stats(); st.Accepted != cycles || st.Departed != cycles {
		t.Errorf("stats %+v, want %d accepted and departed", st, cycles)
	}
	// Given-back memory waits out a short quarantine.
	for deadline := time.Now().Add(10 * time.Second); scrape(t, srv.Info().Metrics)[memFree] != free0; {
		if time.Now().After(deadline) {
			t.Fatalf("free memory %v after %d clients, %v before", scrape(t, srv.Info().Metrics)[memFree], cycles, free0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, hello := range []memnode.Hello{{Service: "pilaf", Token: "t"}, {Service: "race"}, {Service: "race", Token: "x"}} {
		_, _, _, _, err := dial(1000+i, hello)
		if !errors.Is(err, cm.ErrRejected) {
			t.Errorf("%+v: %v, want refused", hello, err)
		}
	}
}

// TestCheckDesign names the designs.
func TestCheckDesign(t *testing.T) {
	if err := stores.CheckDesign("nonsense"); !errors.Is(err, verbs.ErrInvalidArg) || err.Error() != `verbs: invalid argument: no store design "nonsense" (want one of [pilaf prism-kv race smart-ht])` {
		t.Errorf("%v", err)
	}
	for _, d := range stores.Designs {
		if err := stores.CheckDesign(d); err != nil {
			t.Error(err)
		}
	}
}

// TestServiceFreesFailedHandshakes: clients whose handshake never
// completes leave nothing behind (the CQ made for each was once kept).
func TestServiceFreesFailedHandshakes(t *testing.T) {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://stores-stall/node", CM: "127.0.0.1:0", HandshakeTimeout: 20 * time.Millisecond,
		NewService: stores.Service("prism-kv", 1000, 64), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, err := stallproxy.Start(srv.Info().CM)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dev, err := verbs.Open("loop://stores-stall/client")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(16)
	h0 := heapAlloc()
	const n = 200
	for i := range n {
		// The node may time the exchange out before it replies on a
		// loaded machine: the dial then fails, which is as good a
		// failed handshake as a swallowed RTU.
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := cm.Dial(dctx, dev, p.Addr(), cm.Options{PD: pd, SendCQ: cq, RecvCQ: cq, PrivateData: memnode.Hello{Service: "prism-kv"}.Marshal()})
		cancel()
		if err != nil {
			t.Logf("dial %d: %v", i, err)
			continue
		}
		conn.Close()
	}
	// Every exchange ends at the node: refused by memnode after its
	// timeout, or cut by the listener before memnode saw it.
	for deadline := time.Now().Add(10 * time.Second); p.Pending() > 0 || srv.Stats().Handshakes > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, %d exchanges open: the stalled handshakes did not time out", srv.Stats(), p.Pending())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := srv.Stats(); st.Rejected == 0 {
		t.Errorf("stats %+v: no handshake was refused", st)
	}
	if st := srv.Stats(); st.Clients != 0 || st.Handshakes != 0 || st.Accepted != 0 {
		t.Errorf("stats %+v", st)
	}
	if h := heapAlloc(); h > h0+16<<20 {
		t.Errorf("heap %d MiB after %d failed handshakes, %d MiB before", h>>20, n, h0>>20)
	}
}

// heapAlloc returns the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scrape returns the metrics at url as name{labels} → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for l := range strings.SplitSeq(string(body), "\n") {
		if i := strings.LastIndexByte(l, ' '); i > 0 && !strings.HasPrefix(l, "#") {
			if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
				m[l[:i]] = v
			}
		}
	}
	return m
}
