package sockd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/internal/remotedev"
	"github.com/rdmakit/rdmakit/sock"
)

// listenerRole is a child that registers an echoing sock listener with a
// daemon (arg: "UNIX|URI"), says "ready" and serves until killed or its
// stdin closes.
const listenerRole = "sockd-listener"

func init() {
	remotedev.Role(listenerRole, func(arg string) int {
		unix, uri, _ := strings.Cut(arg, "|")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ln, err := sock.Config{App: "victim", Control: &Client{Unix: unix}}.Listen(ctx, uri)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go io.Copy(c, c)
			}
		}()
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// TestKilledListenerLeavesNothing: a listener process killed with SIGKILL
// while holding its registration and admitted connections — the daemon
// drops the listener and releases the connections, and the address can be
// registered again.
func TestKilledListenerLeavesNothing(t *testing.T) {
	s, cp := startServer(t, &Policy{Quotas: map[string]Quota{"dialer": {MaxConns: 3}}})
	uri := shmURI()
	child, err := remotedev.StartChild(listenerRole, cp.Unix+"|"+uri)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Kill(5 * time.Second)
	if _, err := child.Expect("ready"); err != nil {
		t.Fatal(err)
	}
	l, ok := listenerStatus(s, uri)
	if !ok || l.PID != child.Process().Pid || l.App != "victim" {
		t.Fatalf("registration %+v (found %v), want the child's (pid %d)", l, ok, child.Process().Pid)
	}
	d := &sock.Dialer{Config: sock.Config{App: "dialer"}}
	for range 3 {
		c, err := dial(t, d, uri)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c)
	}
	if n := appConns(s, "dialer"); n != 3 {
		t.Fatalf("dialer holds %d connections, want 3", n)
	}
	if err := child.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the killed listener's entries to go", func() bool {
		st := s.Status()
		return len(st.Listeners) == 0 && len(st.Apps) == 0
	})
	// Its quota is free again and its address can be registered again.
	echoListener(t, sock.Config{App: "db", Control: cp}, uri)
	for range 3 {
		c, err := dial(t, d, uri)
		if err != nil {
			t.Fatalf("after the kill: %v", err)
		}
		roundTrip(t, c)
	}
}

// TestDeadProcessDropped: a registration whose process the pid check finds
// dead is dropped even though its socket is open; the listener then
// refuses connections (no control plane, no admission).
func TestDeadProcessDropped(t *testing.T) {
	s, cp := startServer(t, nil)
	uri := shmURI()
	echoListener(t, sock.Config{App: "db", Control: cp}, uri)
	d := &sock.Dialer{Config: sock.Config{App: "web"}}
	if _, err := dial(t, d, uri); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.alive = func(int) bool { return false }
	s.mu.Unlock()
	waitFor(t, "the dead process's listener to go", func() bool {
		_, ok := listenerStatus(s, uri)
		return !ok && appConns(s, "web") == 0
	})
	if _, err := dial(t, d, uri); !errors.Is(err, sock.ErrRefused) {
		t.Fatalf("dial after the registration ended: %v, want ErrRefused", err)
	}
}
