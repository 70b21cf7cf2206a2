package remotedev_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
	"github.com/rdmakit/rdmakit/verbs/verbstest"
)

// serve runs a server in this process on a fresh Unix socket and returns a
// client of it; both stop at the end of the test.
func serve(t testing.TB, opts ...remotedev.Option) *remotedev.Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- remotedev.Serve(ctx, l, opts...) }()
	c, err := remotedev.Dial(ctx, path)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return c
}

// allRemote opens every device through the client: each call of the suite
// crosses the control connection.
type allRemote struct{ c *remotedev.Client }

func (allRemote) Name() string { return "remotedev(tcp)" }

func (p allRemote) Open(t testing.TB, n int) []verbs.Device {
	t.Helper()
	devs := make([]verbs.Device, n)
	for i := range devs {
		d, err := p.c.Open("tcp://127.0.0.1:0?memfd=1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	return devs
}

// Kill implements verbstest.Killer with tcp.Crash run by the server.
func (allRemote) Kill(t testing.TB, d verbs.Device) {
	if err := remotedev.Crash(d); err != nil {
		t.Fatal(err)
	}
}

func TestConformanceProxied(t *testing.T) {
	c := serve(t, remotedev.WithCrash(tcp.Crash))
	verbstest.Run(t, allRemote{c})
}

func open(t *testing.T, c *remotedev.Client) verbs.Device {
	t.Helper()
	d, err := c.Open("tcp://127.0.0.1:0?memfd=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestErrorsKeepTheirIdentity(t *testing.T) {
	c := serve(t)
	if _, err := c.Open("tcp://a/b/c"); !errors.Is(err, verbs.ErrBadURI) {
		t.Errorf("Open(bad URI): %v, want ErrBadURI", err)
	}
	if _, err := c.Open("nosuchscheme://x"); !errors.Is(err, verbs.ErrUnknownScheme) {
		t.Errorf("Open(unknown scheme): %v, want ErrUnknownScheme", err)
	}
	d := open(t, c)
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.AllocMR(64, verbs.AccessRemoteWrite); !errors.Is(err, verbs.ErrAccess) {
		t.Errorf("AllocMR(bad access): %v, want ErrAccess", err)
	}
	cq, err := d.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pd.AllocMR(64, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	err = q.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: m.Addr(), Length: 8, LKey: m.LKey()}}}})
	var pe *verbs.PostError
	if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, verbs.ErrInvalidState) {
		t.Errorf("PostRecv in RESET: %v, want a PostError at 0 wrapping ErrInvalidState", err)
	}
	if err := verbs.ActivateUD(q, 1); err == nil {
		t.Error("RC QP took UD attributes")
	}
	// A CQ of another device is refused as the local NIC refuses it.
	local, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	lcq, err := local.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: lcq, RecvCQ: cq}); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Errorf("CreateQP with a foreign CQ: %v, want ErrInvalidArg", err)
	}
	// Regions need a memfd to be shared.
	plain, err := c.Open("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ppd, err := plain.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ppd.AllocMR(64, verbs.AccessAll); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("AllocMR without memfd: %v, want ErrNotSupported", err)
	}
	if err := remotedev.Crash(d); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("Crash without WithCrash: %v, want ErrNotSupported", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AllocPD(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("AllocPD after Close: %v, want ErrClosed", err)
	}
	if _, err := cq.Poll(make([]verbs.WC, 4)); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	if err := m.Deregister(); !errors.Is(err, verbs.ErrInvalidState) {
		t.Errorf("Deregister after Close: %v, want ErrInvalidState", err)
	}
}

func TestWaitCancel(t *testing.T) {
	c := serve(t)
	d := open(t, c)
	cq, err := d.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	// Cancelled while waiting in the server, no deadline.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cq.Wait(ctx) }()
	time.Sleep(5 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
	case <-time.After(verbstest.WaitTimeout):
		t.Fatal("cancelled Wait did not return")
	}
	// The connection dies while waiting.
	go func() { done <- cq.Wait(context.Background()) }()
	time.Sleep(5 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("Wait on a lost connection: %v, want ErrClosed", err)
		}
	case <-time.After(verbstest.WaitTimeout):
		t.Fatal("Wait did not return when the connection closed")
	}
	if _, err := d.AllocPD(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("call on a lost connection: %v, want ErrClosed", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
}
