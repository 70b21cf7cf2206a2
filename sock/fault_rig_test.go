package sock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"
)

// The fault tests' scaffolding: a listener that several dialers connect
// to, round trips that prove a connection still works, and the checks of
// how a connection ended.

// faultTimeout bounds every wait of the fault tests: a failure must be
// reported promptly, and a hang is a failure.
const faultTimeout = 5 * time.Second

var transports = []string{"shm", "tcp"}

// faultRig is a listener the tests dial, each dialer with its own link.
type faultRig struct {
	t   testing.TB
	cfg Config
	ln  *Listener
}

func newFaultRig(t testing.TB, cfg Config, transport string) *faultRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	ln, err := cfg.Listen(ctx, testURI(t, transport))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &faultRig{t: t, cfg: cfg, ln: ln}
}

// dialer returns a Dialer with the rig's Config: its own link to the
// listener, closed with the test.
func (r *faultRig) dialer() *Dialer {
	d := &Dialer{Config: r.cfg}
	r.t.Cleanup(func() { closeDialer(d) })
	return d
}

// closeDialer takes down a Dialer's links and devices (a Dialer has no
// Close: they live as long as the process otherwise).
func closeDialer(d *Dialer) {
	d.mu.Lock()
	eps := d.eps
	d.eps = map[string]*endpoint{}
	d.mu.Unlock()
	for _, ep := range eps {
		ep.mu.Lock()
		var ls []*link
		for l := range ep.links {
			ls = append(ls, l)
		}
		ep.mu.Unlock()
		for _, l := range ls {
			l.fail(errLinkClosed)
			l.closed.Wait()
		}
		// As a listener's endpoint does: the links' release runs first.
		time.Sleep(10 * time.Millisecond)
		ep.closeDevice()
	}
}

// dial connects d to the listener and returns the dialed and the accepted
// end.
func (r *faultRig) dial(d *Dialer) (*Conn, *Conn) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := r.ln.Accept()
		ch <- res{c, err}
	}()
	c, err := d.Dial(ctx, r.ln.Addr().String())
	if err != nil {
		r.t.Fatal(err)
	}
	res1 := <-ch
	if res1.err != nil {
		r.t.Fatal(res1.err)
	}
	acc := res1.c.(*Conn)
	r.t.Cleanup(func() { c.Close(); acc.Close() })
	return c, acc
}

// roundTrip sends msg from x to y and back, and checks both arrive whole.
func roundTrip(x, y net.Conn, msg []byte) error {
	dl := time.Now().Add(faultTimeout)
	for _, c := range []net.Conn{x, y} {
		c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	got := make([]byte, len(msg))
	for _, hop := range [][2]net.Conn{{x, y}, {y, x}} {
		errc := make(chan error, 1)
		go func() {
			_, err := hop[0].Write(msg)
			errc <- err
		}()
		if _, err := io.ReadFull(hop[1], got); err != nil {
			return fmt.Errorf("round trip: read: %w", err)
		}
		if err := <-errc; err != nil {
			return fmt.Errorf("round trip: write: %w", err)
		}
		if !bytes.Equal(got, msg) {
			return errors.New("round trip: the message arrived changed")
		}
	}
	return nil
}

// readUntilErr reads c until an error, within faultTimeout (a read deadline
// then is a failure of its own: nothing ended the connection), and
// returns the bytes read and the error.
func readUntilErr(c net.Conn) (int, error) {
	c.SetReadDeadline(time.Now().Add(faultTimeout))
	buf := make([]byte, 64<<10)
	total := 0
	for {
		n, err := c.Read(buf)
		total += n
		if err != nil {
			return total, err
		}
	}
}

// pattern returns n pseudo-random bytes, the same for the same seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// isReset reports whether err says the connection was reset, as a TCP
// connection's would: ErrReset and syscall.ECONNRESET.
func isReset(err error) bool {
	return errors.Is(err, ErrReset) && errors.Is(err, syscall.ECONNRESET)
}

// expectReset reads c until it fails and checks that the failure is a
// reset (with ErrProtocol too when protocol is set), not io.EOF, a
// deadline or a hang.
func expectReset(t testing.TB, c net.Conn, protocol bool, who string) {
	t.Helper()
	_, err := readUntilErr(c)
	switch {
	case !isReset(err):
		t.Fatalf("%s: Read returned %v, want a reset (ErrReset, ECONNRESET)", who, err)
	case protocol && !errors.Is(err, ErrProtocol):
		t.Fatalf("%s: Read returned %v, want a reset for a protocol violation (ErrProtocol)", who, err)
	case !protocol && errors.Is(err, ErrProtocol):
		t.Fatalf("%s: Read returned %v, want a connection reset, not a failed link", who, err)
	}
}
