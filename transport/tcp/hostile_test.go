package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// Tests of a node under peers that misbehave after a valid handshake:
// frames announced and never finished, connections beyond the limit,
// replies never read.

func testDevice(t testing.TB, opts options) *device {
	t.Helper()
	if opts.dialTimeout == 0 {
		opts.dialTimeout = 5 * time.Second
	}
	if opts.keepalive == 0 {
		opts.keepalive = time.Second
	}
	d, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// openDevice opens tcp://127.0.0.1:0?query.
func openDevice(t testing.TB, query string) *device {
	t.Helper()
	dev, err := verbs.Open("tcp://127.0.0.1:0?" + query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev.(*device)
}

// rawPeer opens a connection to d and performs the handshake as the
// device at claim would.
func rawPeer(t testing.TB, d *device, claim string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", d.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(appendHello(nil, &hello{version: Version, address: claim, token: d.opts.token})); err != nil {
		t.Fatal(err)
	}
	typ, _, err := newFrameReader(c, maxHandshake, maxHandshake).next()
	if err != nil || typ != frameWelcome {
		t.Fatalf("handshake: frame %d, %v", typ, err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// served is a connected RC pair from client to server with a region on
// the server.
type served struct {
	qa, qb verbs.QP
	cqa    verbs.CQ
	la, mb verbs.MR
}

func connectPair(t testing.TB, client, server *device, size int) *served {
	t.Helper()
	pa, _ := client.AllocPD()
	pb, _ := server.AllocPD()
	cqa, _ := client.CreateCQ(64)
	cqb, _ := server.CreateCQ(64)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	if err := verbs.ConnectRC(qa, verbs.AccessAll, server.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qb, verbs.AccessAll, client.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	la, err := pa.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := pb.AllocMR(size, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	return &served{qa: qa, qb: qb, cqa: cqa, la: la, mb: mb}
}

// roundTrip writes 8 bytes to the server's region and reads them back.
func (p *served) roundTrip(t testing.TB) {
	t.Helper()
	copy(p.la.Bytes(), "8 bytes!")
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{{Addr: p.la.Addr(), Length: 8, LKey: p.la.LKey()}},
			RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{{Addr: p.la.Addr() + 8, Length: 8, LKey: p.la.LKey()}},
			RemoteAddr: p.mb.Addr(), RKey: p.mb.RKey()},
	}
	if err := p.qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if n, err := verbs.PollWait(ctx, p.cqa, wc, verbs.PollAdaptive); n != 1 || err != nil {
		t.Fatalf("a well-behaved client is not served: %v", err)
	}
	if wc[0].Status != verbs.StatusSuccess || string(p.la.Bytes()[8:16]) != "8 bytes!" {
		t.Fatalf("round trip: %+v, read %q", wc[0], p.la.Bytes()[8:16])
	}
}

// readRequest is a READ frame of n bytes of m, as the requester QP qpn of
// the pair's client would send it.
func readRequest(p *served, seq uint32, n uint32) []byte {
	return appendRequest(nil, &nic.Request{SrcQPN: p.qa.QPN(), Epoch: 1, Seq: seq, DstQPN: p.qb.QPN(),
		Opcode: verbs.OpRead, RKey: p.mb.RKey(), RemoteAddr: p.mb.Addr(), Length: n})
}

// TestHostileFramesStayWithinBudget: 100 connections announce a maximal
// frame each and send 1 MiB of it. The node holds no more than its memory
// budget for them (before, each such frame was allocated in full as its
// length arrived: 1.6 GB), and a well-behaved client is served meanwhile.
func TestHostileFramesStayWithinBudget(t *testing.T) {
	const conns, sent, budget = 100, 1 << 20, 2*maxFrame + 1<<20
	srv := openDevice(t, fmt.Sprintf("membudget=%d", budget))
	client := testDevice(t, options{})
	p := connectPair(t, client, srv, 4096)
	p.roundTrip(t)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	frame := binary.LittleEndian.AppendUint32(nil, maxFrame)
	frame = append(frame, frameRequest)
	frame = append(frame, make([]byte, sent)...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrote := 0
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = rawPeer(t, srv, client.Address())
		wg.Add(1)
		go func(c net.Conn) { // blocks while the node reads nothing of it
			defer wg.Done()
			if _, err := c.Write(frame); err == nil {
				mu.Lock()
				wrote++
				mu.Unlock()
			}
		}(cs[i])
	}
	// The node reads two of the frames (its budget's worth) as far as they
	// go; the other connections wait for budget.
	deadline := time.Now().Add(10 * time.Second)
	for srv.budget.inUse() < 2*maxFrame && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := srv.budget.inUse(); got > budget {
		t.Fatalf("budget overdrawn: %d of %d bytes", got, budget)
	}
	p.roundTrip(t)
	time.Sleep(100 * time.Millisecond) // let the two frames' megabyte arrive
	var now runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&now)
	grown := int64(now.HeapInuse) - int64(before.HeapInuse)
	limit := int64(budget + conns*connBuffers + 8<<20)
	t.Logf("100 hostile connections: heap +%.1f MiB (budget %d MiB, limit %d MiB), budget in use %d MiB",
		float64(grown)/(1<<20), budget>>20, limit>>20, srv.budget.inUse()>>20)
	if grown > limit {
		t.Errorf("heap grew by %d MiB under 100 hostile connections: more than the budget of %d MiB and their buffers",
			grown>>20, budget>>20)
	}
	for _, c := range cs {
		c.Close()
	}
	wg.Wait()
}

// TestStalledFrameIsClosed: a peer that stops sending within a large frame
// loses its connection after 5 keep-alive intervals, and its share of the
// budget returns.
func TestStalledFrameIsClosed(t *testing.T) {
	srv := openDevice(t, "keepalive=20ms")
	c := rawPeer(t, srv, "tcp://127.0.0.1:1")
	frame := binary.LittleEndian.AppendUint32(nil, maxFrame)
	frame = append(frame, frameRequest)
	frame = append(frame, make([]byte, 1<<10)...)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the node kept a connection stalled in a large frame: %v", err)
	}
	for i := 0; srv.budget.inUse() != 0; i++ {
		if i == 500 {
			t.Fatalf("%d bytes of budget still held", srv.budget.inUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if srv.Refused() != 1 {
		t.Errorf("refused %d connections, want 1", srv.Refused())
	}
}

// TestMaxConns: connections beyond maxconns are refused with REJECT and
// counted; once one closes, a new one is served.
func TestMaxConns(t *testing.T) {
	srv := openDevice(t, "maxconns=2")
	c1 := rawPeer(t, srv, "tcp://127.0.0.1:1")
	rawPeer(t, srv, "tcp://127.0.0.1:1")
	client := testDevice(t, options{})
	if _, err := client.Resolve(srv.Address()); !errors.Is(err, ErrRejected) {
		t.Fatalf("a connection beyond maxconns: %v, want ErrRejected", err)
	}
	if srv.Refused() != 1 {
		t.Errorf("refused %d connections, want 1", srv.Refused())
	}
	c1.Close()
	for i := 0; ; i++ {
		srv.mu.Lock()
		n := len(srv.conns)
		srv.mu.Unlock()
		if n < 2 {
			break
		}
		if i == 500 {
			t.Fatal("a closed connection is still counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	connectPair(t, client, srv, 4096).roundTrip(t)
}

// stuckReader is a peer that sends many large READs and reads none of the
// replies, so the node's writes to it block.
func stuckReader(t *testing.T, opts options) (*device, *served, net.Conn) {
	srv := testDevice(t, opts)
	client := testDevice(t, options{})
	const size = 1 << 20
	p := connectPair(t, client, srv, size)
	c := rawPeer(t, srv, client.Address())
	var reqs []byte
	for i := range 64 { // 64 MiB of replies: more than the sockets buffer
		reqs = append(reqs, readRequest(p, uint32(i), size)...)
	}
	go c.Write(reqs)
	// Wait until the node stops serving them: its writes block.
	var last uint64
	for still := 0; still < 10; {
		time.Sleep(20 * time.Millisecond)
		n := srv.node.Stats().Ops[verbs.OpRead]
		if n > 0 && n == last {
			still++
		} else {
			still = 0
		}
		last = n
	}
	return srv, p, c
}

// within runs f and reports whether it returned within d. f keeps running
// otherwise.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestStuckReaderDoesNotHoldDeregister: a READ reply's region is released
// before the reply is written, so a peer that reads nothing cannot hold
// MR.Deregister.
func TestStuckReaderDoesNotHoldDeregister(t *testing.T) {
	_, p, c := stuckReader(t, options{})
	if !within(5*time.Second, func() { p.mb.Deregister() }) {
		c.Close() // lets the blocked write fail and the deregistration end
		t.Fatal("MR.Deregister hangs while a peer does not read its READ replies")
	}
}

// TestStuckReaderDoesNotHoldClose: the device closes within a second
// whatever its peers do (SIGTERM of a node must).
func TestStuckReaderDoesNotHoldClose(t *testing.T) {
	srv, _, c := stuckReader(t, options{})
	start := time.Now()
	if !within(5*time.Second, func() { srv.Close() }) {
		c.Close()
		t.Fatal("device Close hangs while a peer does not read its replies")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("device Close took %v with a peer that does not read, want ≤ 1s", took)
	}
}

// TestStuckReaderIsDisconnected: a peer that reads no reply for 5
// keep-alive intervals loses its connection.
func TestStuckReaderIsDisconnected(t *testing.T) {
	_, _, c := stuckReader(t, options{keepalive: 20 * time.Millisecond})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c) // what the node wrote before it gave up, then the end
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a peer that reads nothing keeps its connection")
	}
}

// TestLimitOptions: membudget= and maxconns= are checked when the device
// opens.
func TestLimitOptions(t *testing.T) {
	for _, q := range []string{"membudget=1MiB", "membudget=lots", "maxconns=0", "maxconns=-3"} {
		if _, err := verbs.Open("tcp://127.0.0.1:0?" + q); !errors.Is(err, verbs.ErrBadURI) {
			t.Errorf("%s: %v, want verbs.ErrBadURI", q, err)
		}
	}
	d := openDevice(t, "membudget=1GiB&maxconns=10")
	if d.budget.total != 1<<30 || d.opts.maxConns != 10 {
		t.Errorf("membudget %d, maxconns %d", d.budget.total, d.opts.maxConns)
	}
	d = openDevice(t, "")
	if d.budget.total != DefaultMemBudget || d.opts.maxConns != DefaultMaxConns {
		t.Errorf("default membudget %d, maxconns %d", d.budget.total, d.opts.maxConns)
	}
}
