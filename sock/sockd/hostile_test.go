package sockd

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/sock"
)

// rawExchange writes b to a fresh connection at network/address and reads
// the daemon's reply and then the end of the connection.
func rawExchange(t *testing.T, network, address string, b []byte) (msg, error) {
	t.Helper()
	c, err := net.Dial(network, address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	m, err := readMsg(c, nil, maxStatusFrame)
	if err != nil {
		return m, err
	}
	if _, err := readMsg(c, nil, maxStatusFrame); err == nil {
		t.Fatal("the daemon kept talking to a client that broke the protocol")
	}
	return m, nil
}

func TestHostileClients(t *testing.T) {
	s, cp := startServer(t, nil)
	tcp := s.TCPAddr().String()
	for _, tc := range []struct {
		name, network, address string
		frame                  []byte
		code                   uint8
	}{
		{"version", "unix", cp.Unix, []byte{0, 0, 0, 6, 9, msgStatus, 0, 0, 0, 1}, codeVersion},
		{"garbage", "unix", cp.Unix, []byte{0, 0, 0, 3, 'a', 'b', 'c'}, codeBad},
		{"huge frame", "unix", cp.Unix, []byte{0xff, 0xff, 0xff, 0xff, 1}, codeBad},
		{"reply type", "unix", cp.Unix, (&msg{typ: msgOK, id: 1}).encode(nil), codeBad},
		{"register over tcp", "tcp", tcp, (&msg{typ: msgRegister, id: 1, uri: "shm://x", app: "a", pid: 1, parts: 1, ring: 1, mtu: 1}).encode(nil), codeBad},
		{"status over tcp", "tcp", tcp, (&msg{typ: msgStatus, id: 1}).encode(nil), codeBad},
	} {
		m, err := rawExchange(t, tc.network, tc.address, tc.frame)
		if err != nil || m.typ != msgError || m.code != tc.code {
			t.Errorf("%s: reply %+v, %v; want ERROR code %d", tc.name, m, err, tc.code)
		}
	}
	// A client cannot register another process's listener.
	c, err := net.Dial("unix", cp.Unix)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reg := msg{typ: msgRegister, id: 1, uri: "shm://other", app: "a", pid: uint32(os.Getpid() + 1), parts: 1, ring: 1 << 16, mtu: 64}
	if m, err := exchange(ctx, c, reg, maxFrame); err != nil || m.typ != msgError || m.code != codeBad {
		t.Errorf("registering another pid: %+v, %v", m, err)
	}
	// A second registration on one session is refused.
	reg.pid = uint32(os.Getpid())
	if m, err := exchange(ctx, c, reg, maxFrame); err != nil || m.typ != msgOK {
		t.Fatalf("register: %+v, %v", m, err)
	}
	reg.uri = "shm://other2"
	if m, err := exchange(ctx, c, reg, maxFrame); err != nil || m.typ != msgError {
		t.Errorf("second registration: %+v, %v", m, err)
	}
	// The daemon still serves everyone else.
	if st, err := cp.Status(ctx); err != nil || len(st.Listeners) != 1 {
		t.Fatalf("status: %+v, %v", st, err)
	}
}

func TestSessionsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Unix: "@rdmakit-sockd-bounded-" + shmURI()[6:], Listen: "none", MaxSessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp := &Client{Unix: s.UnixAddr()}
	var unregs []func()
	for i := range 2 {
		a := sock.Addr{Transport: "shm", Host: "b" + shmURI()[6:]}
		u, err := cp.Register(ctx, sock.ListenerInfo{Addr: a, App: "a", PID: os.Getpid(), Partitions: 1, RingSize: 1 << 16, MTU: 64})
		if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
		unregs = append(unregs, u)
	}
	a := sock.Addr{Transport: "shm", Host: "b" + shmURI()[6:]}
	_, err = cp.Register(ctx, sock.ListenerInfo{Addr: a, App: "a", PID: os.Getpid(), Partitions: 1, RingSize: 1 << 16, MTU: 64})
	if !errors.Is(err, ErrFull) {
		t.Fatalf("third session: %v, want ErrFull", err)
	}
	unregs[0]()
	// The ended session's slot is free again (its end is seen asynchronously).
	waitFor(t, "a free session slot", func() bool {
		u, err := cp.Register(ctx, sock.ListenerInfo{Addr: a, App: "a", PID: os.Getpid(), Partitions: 1, RingSize: 1 << 16, MTU: 64})
		if err == nil {
			u()
		}
		return err == nil
	})
	unregs[1]()
}

// TestIdleClientDropped: a local client that registers nothing and says
// nothing is dropped after IdleTimeout; a registration's session is kept.
func TestIdleClientDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Unix: "@rdmakit-sockd-idle-" + shmURI()[6:], Listen: "none", IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp := &Client{Unix: s.UnixAddr()}
	uri := shmURI()
	echoListener(t, sock.Config{App: "db", Control: cp}, uri)
	idle, err := net.Dial("unix", s.UnixAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := idle.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle client: read %v, want the daemon to close it", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("dropped after %v, before the idle timeout", waited)
	}
	time.Sleep(200 * time.Millisecond)
	if _, ok := listenerStatus(s, uri); !ok {
		t.Fatal("a registration's session was dropped as idle")
	}
	if _, err := dial(t, &sock.Dialer{Config: sock.Config{App: "web"}}, uri); err != nil {
		t.Fatalf("dial the registered listener: %v", err)
	}
}
