package memnode_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/internal/stallproxy"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestDepartedClientsAreFreed connects and disconnects clients, on loop
// and on tcp: every departed client's QP, CQ, SRQ, buffers and goroutine
// must be freed, found by the liveness probe.
func TestDepartedClientsAreFreed(t *testing.T) {
	for _, tc := range []struct {
		transport string
		cycles    int
	}{{"loop", 200}, {"tcp", 20}} {
		t.Run(tc.transport, func(t *testing.T) {
			uri := func(node string) string {
				if tc.transport == "tcp" {
					return "tcp://127.0.0.1:0"
				}
				return loopURI(t, node)
			}
			base := runtime.NumGoroutine()
			fabric := uri("node")
			s := start(t, memnode.Config{Device: fabric, Memory: 64 << 10, Probe: 2 * time.Millisecond, Echo: true, Recv: 16})
			clientURI := func() string {
				if tc.transport == "tcp" {
					return "tcp://127.0.0.1:0"
				}
				return strings.TrimSuffix(fabric, "node") + "client"
			}
			withServer := runtime.NumGoroutine()
			for i := range tc.cycles {
				c, err := dial(t, clientURI(), s.Info().CM, nil)
				if err != nil {
					t.Fatal(err)
				}
				if st := c.do(t, verbs.OpWrite, 8); st != verbs.StatusSuccess {
					t.Fatalf("cycle %d: WRITE %v", i, st)
				}
				c.close()
				// The loop fabric has one client name: wait for the
				// departure before the name is reused.
				waitFor(t, "the client to be found gone", func() bool { return s.Stats().Departed == uint64(i+1) })
			}
			waitFor(t, "every client freed", func() bool { return s.Stats().Clients == 0 })
			if st := s.Stats(); st.Accepted != uint64(tc.cycles) || st.Departed != uint64(tc.cycles) || st.Handshakes != 0 {
				t.Errorf("stats %+v, want %d accepted and departed", st, tc.cycles)
			}
			goroutinesBackTo(t, withServer)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			goroutinesBackTo(t, base)
		})
	}
}

// TestStalledHandshake: a dialer that never completes its handshake does
// not delay another client's, and Close cuts it short.
func TestStalledHandshake(t *testing.T) {
	fabric := loopURI(t, "node")
	s := start(t, memnode.Config{Device: fabric, Memory: 4096, HandshakeTimeout: time.Minute})
	p, err := stallproxy.Start(s.Info().CM)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base := strings.TrimSuffix(fabric, "node")
	stalled, err := dial(t, base+"stalled", p.Addr(), nil) // its RTU never arrives
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.close()
	waitFor(t, "the stalled handshake", func() bool { return s.Stats().Handshakes == 1 })

	c, err := dial(t, base+"client", s.Info().CM, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	waitFor(t, "the second client", func() bool { return s.Stats().Accepted == 1 })
	if st := s.Stats(); st.Handshakes != 1 || st.Clients != 1 {
		t.Fatalf("stats %+v: want the first handshake still stalled and the second client served", st)
	}
	if st := c.do(t, verbs.OpRead, 8); st != verbs.StatusSuccess {
		t.Fatalf("READ: %v", st)
	}

	// SIGTERM's path: Close returns within a second whatever the
	// stalled dialer and the client do.
	t0 := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Close took %v with a stalled handshake", d)
	}
	if st := s.Stats(); st.Handshakes != 0 || st.Clients != 0 {
		t.Errorf("after Close: %+v", st)
	}
}

// TestToken: a client without the token or with a wrong one is refused.
func TestToken(t *testing.T) {
	fabric := loopURI(t, "node")
	base := strings.TrimSuffix(fabric, "node")
	s := start(t, memnode.Config{Device: fabric, Memory: 4096, Token: "s3cret"})
	if !s.Info().Token {
		t.Error("Info.Token is false")
	}
	for i, hello := range [][]byte{nil, []byte("wrong"), []byte("s3cre"), []byte("s3cret\x00")} {
		_, err := dial(t, base+"bad"+string(rune('a'+i)), s.Info().CM, hello)
		var rej *cm.RejectedError
		if !errors.As(err, &rej) || rej.Reason != "bad token" {
			t.Errorf("hello %q: %v, want rejected: bad token", hello, err)
		}
	}
	c, err := dial(t, base+"good", s.Info().CM, memnode.Hello{Token: "s3cret"}.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	// The refusal reaches a client before the node's goroutine counts it.
	waitFor(t, "4 refusals counted", func() bool { return s.Stats().Rejected == 4 })
}

// TestConfigLimits: a configuration no client could be served with fails
// at Start with the field named.
func TestConfigLimits(t *testing.T) {
	for _, tc := range []struct {
		cfg   memnode.Config
		field string
	}{
		{memnode.Config{Recv: 100000}, "Recv"},
		{memnode.Config{Memory: 100, Regions: 3}, "Memory"},
		{memnode.Config{Regions: cm.MaxDescs + 1}, "Regions"},
		{memnode.Config{RecvSize: memnode.MaxRecvSize + 1}, "RecvSize"},
		{memnode.Config{Token: "a\x00b"}, "Token"},
		{memnode.Config{Access: verbs.AccessLocalWrite}, "Access"},
	} {
		tc.cfg.Device = loopURI(t, "node")
		tc.cfg.CM = "127.0.0.1:0"
		s, err := memnode.Start(context.Background(), tc.cfg)
		var ce *memnode.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, verbs.ErrInvalidArg) {
			t.Errorf("%+v: %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
		if s != nil {
			s.Close()
		}
	}
}

// TestHello: the private data a client sends.
func TestHello(t *testing.T) {
	for h, want := range map[memnode.Hello]string{{}: "", {Token: "t"}: "t", {Service: "race"}: "race", {Service: "race", Token: "t"}: "race\x00t"} {
		if got := string(h.Marshal()); got != want {
			t.Errorf("%+v: %q, want %q", h, got, want)
		}
	}
}

// TestReadInfo reads the announcement back and leaves what follows.
func TestReadInfo(t *testing.T) {
	in := strings.NewReader("rdmakit node\n  device x\n{\"device\":\"tcp://h:1\",\"cm\":\"h:2\",\"echo\":true,\"regions\":[{\"addr\":8,\"len\":16,\"rkey\":3}]}\nafter\n")
	var echo strings.Builder
	info, err := memnode.ReadInfo(in, &echo)
	if err != nil {
		t.Fatal(err)
	}
	if info.Device != "tcp://h:1" || info.CM != "h:2" || !info.Echo || len(info.Regions) != 1 || info.Regions[0].Desc() != (cm.MRDesc{Addr: 8, Len: 16, RKey: 3}) {
		t.Errorf("info %+v", info)
	}
	if rest := in.Len(); rest != len("after\n") {
		t.Errorf("ReadInfo read past its line: %d bytes left", rest)
	}
	if !strings.HasPrefix(echo.String(), "rdmakit node\n") {
		t.Errorf("echo %q", echo.String())
	}
	if _, err := memnode.ReadInfo(strings.NewReader("no json\n"), nil); !errors.Is(err, memnode.ErrNoInfo) {
		t.Errorf("no JSON: %v", err)
	}
}

// TestFailedSessionIsFreed: a client whose connection fails at the node
// (a SEND larger than the receives) is freed like a departed one.
func TestFailedSessionIsFreed(t *testing.T) {
	fabric := loopURI(t, "node")
	s := start(t, memnode.Config{Device: fabric, Memory: 4096, Recv: 4, RecvSize: 64, Probe: -1})
	c, err := dial(t, strings.TrimSuffix(fabric, "node")+"client", s.Info().CM, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	waitFor(t, "the client", func() bool { return s.Stats().Clients == 1 })
	if st := c.do(t, verbs.OpSend, 128); st == verbs.StatusSuccess {
		t.Fatal("a 128-byte SEND into 64-byte receives succeeded")
	}
	waitFor(t, "the failed client to be freed", func() bool { return s.Stats().Clients == 0 })
}

// TestMaxClients fills a server to its MaxClients: one more client is
// refused ("node full") and holds nothing; once a client leaves, a new
// one is admitted.
func TestMaxClients(t *testing.T) {
	fabric := loopURI(t, "node")
	peer := func(i int) string { return strings.TrimSuffix(fabric, "node") + fmt.Sprintf("client%d", i) }
	s := start(t, memnode.Config{Device: fabric, Memory: 64 << 10, MaxClients: 3, Probe: 2 * time.Millisecond, Recv: 4})
	var cs []*client
	for i := range 3 {
		c, err := dial(t, peer(i), s.Info().CM, nil)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		cs = append(cs, c)
	}
	_, err := dial(t, peer(3), s.Info().CM, nil)
	if err == nil || !strings.Contains(err.Error(), "node full") {
		t.Fatalf("fourth client: %v, want node full", err)
	}
	waitFor(t, "3 clients and 1 refusal", func() bool { st := s.Stats(); return st.Clients == 3 && st.Rejected == 1 && st.Handshakes == 0 })
	cs[0].close()
	waitFor(t, "the first client to be found gone", func() bool { return s.Stats().Clients == 2 })
	c, err := dial(t, peer(4), s.Info().CM, nil)
	if err != nil {
		t.Fatalf("a client after one left: %v", err)
	}
	if st := c.do(t, verbs.OpWrite, 8); st != verbs.StatusSuccess {
		t.Fatalf("WRITE %v", st)
	}
}

// TestMaxClientsSetsMaxConns: a tcp device gets maxconns= from
// MaxClients unless its URI sets one.
func TestMaxClientsSetsMaxConns(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"tcp://127.0.0.1:0", "maxconns=26"},
		{"tcp://127.0.0.1:0?maxconns=7", "maxconns=7"},
	} {
		got, err := memnode.DeviceURI(tc.uri, "", 5)
		if err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("DeviceURI(%q) = %q, %v; want %s", tc.uri, got, err, tc.want)
		}
	}
	if got, _ := memnode.DeviceURI("loop://f/n", "", 5); got != "loop://f/n" {
		t.Errorf("a loop URI became %q", got)
	}
}
