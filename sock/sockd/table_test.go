package sockd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/sock"
)

func info(uri, app string, parts int) sock.ListenerInfo {
	a, err := parseAddr(uri)
	if err != nil {
		panic(err)
	}
	return sock.ListenerInfo{Addr: a, App: app, PID: 1, Partitions: parts, RingSize: 1 << 20, MTU: 16384}
}

func TestTableLeastLoadedPartition(t *testing.T) {
	tb := newTable(nil)
	if err := tb.register(1, info("shm://web", "web", 3)); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 6 {
		p, err := tb.admit(1, "api", 3)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if fmt.Sprint(got) != "[0 1 2 0 1 2]" {
		t.Fatalf("partitions %v, want [0 1 2 0 1 2]", got)
	}
	tb.release(1, "api", 1, 1)
	tb.release(1, "api", 1, 1)
	for _, want := range []int{1, 1, 0} {
		if p, _ := tb.admit(1, "api", 3); p != want {
			t.Fatalf("after releasing partition 1 twice: admitted to %d, want %d (status %+v)", p, want, tb.status())
		}
	}
}

func TestTableConnQuota(t *testing.T) {
	p := &Policy{Quotas: map[string]Quota{"api": {MaxConns: 2}}}
	tb := newTable(p)
	tb.register(1, info("shm://a", "a", 2))
	tb.register(2, info("shm://b", "b", 2))
	if _, err := tb.admit(1, "api", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.admit(2, "api", 2); err != nil {
		t.Fatal(err)
	}
	// The quota is the application's, over all listeners.
	if _, err := tb.admit(1, "api", 2); !errors.Is(err, ErrQuota) {
		t.Fatalf("third connection: %v, want ErrQuota", err)
	}
	if _, err := tb.admit(1, "other", 2); err != nil {
		t.Fatalf("another app: %v", err)
	}
	// Ending listener 2's session releases what it admitted.
	tb.unregister(2)
	if _, err := tb.admit(1, "api", 2); err != nil {
		t.Fatalf("after listener 2 went: %v", err)
	}
	st := tb.status()
	if len(st.Listeners) != 1 || st.Listeners[0].ByApp["api"] != 2 || st.Listeners[0].Refused != 1 {
		t.Fatalf("status %+v", st)
	}
}

func TestTableReleaseCannotGoNegative(t *testing.T) {
	tb := newTable(nil)
	tb.register(1, info("shm://a", "a", 2))
	tb.admit(1, "api", 2)
	tb.release(1, "api", 0, 1000) // a hostile count
	tb.release(1, "api", 5, 1)    // a partition out of range
	tb.release(1, "ghost", 0, 1)  // an app that holds nothing
	tb.release(9, "api", 0, 1)    // a session that registered nothing
	st := tb.status()
	if st.Listeners[0].Conns[0] != 0 || st.Listeners[0].Conns[1] != 0 || len(st.Listeners[0].ByApp) != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, a := range st.Apps {
		if a.Conns != 0 {
			t.Fatalf("app %+v holds connections", a)
		}
	}
}

func TestTableListenerQuotas(t *testing.T) {
	p := &Policy{Quotas: map[string]Quota{
		"few":   {MaxListeners: 1},
		"small": {MaxWindowBytes: 3 << 20},
	}}
	tb := newTable(p)
	if err := tb.register(1, info("shm://f1", "few", 2)); err != nil {
		t.Fatal(err)
	}
	if err := tb.register(2, info("shm://f2", "few", 2)); !errors.Is(err, ErrQuota) {
		t.Fatalf("second listener: %v, want ErrQuota", err)
	}
	if err := tb.register(3, info("shm://s1", "small", 2)); err != nil { // 2 MiB
		t.Fatal(err)
	}
	if err := tb.register(4, info("shm://s2", "small", 2)); !errors.Is(err, ErrQuota) { // 4 MiB > 3
		t.Fatalf("window over quota: %v, want ErrQuota", err)
	}
	if err := tb.register(5, info("shm://s2", "small", 1)); err != nil { // 3 MiB
		t.Fatalf("window at quota: %v", err)
	}
	if err := tb.register(6, info("shm://f1", "other", 1)); !errors.Is(err, ErrConflict) {
		t.Fatalf("same address twice: %v, want ErrConflict", err)
	}
	tb.unregister(1)
	if err := tb.register(2, info("shm://f2", "few", 2)); err != nil {
		t.Fatalf("after the first went: %v", err)
	}
}

func TestTableDenied(t *testing.T) {
	tb := newTable(&Policy{Default: "deny", Rules: []Rule{{App: "web", Action: "allow"}}})
	tb.register(1, info("shm://a", "a", 2))
	if _, err := tb.admit(1, "intruder", 2); !errors.Is(err, ErrDenied) {
		t.Fatalf("intruder: %v, want ErrDenied", err)
	}
	if _, err := tb.admit(1, "web", 2); err != nil {
		t.Fatalf("web: %v", err)
	}
	if _, err := tb.admit(7, "web", 2); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("unregistered session: %v, want ErrNotRegistered", err)
	}
}

func TestTableAppsBounded(t *testing.T) {
	tb := newTable(nil)
	tb.register(1, info("shm://a", "a", 2))
	var err error
	for i := 0; i <= MaxApps && err == nil; i++ {
		_, err = tb.admit(1, fmt.Sprint("app", i), 2)
	}
	if !errors.Is(err, ErrFull) || len(tb.apps) > MaxApps {
		t.Fatalf("%d apps, last error %v; want at most %d and ErrFull", len(tb.apps), err, MaxApps)
	}
}

func TestTableResolve(t *testing.T) {
	tb := newTable(nil)
	tb.register(1, info("tcp://0.0.0.0:7480", "a", 1))
	tb.register(2, info("tcp://127.0.0.1:7481", "b", 1))
	tb.register(3, info("tcp://10.1.1.1:7482", "c", 1))
	tb.register(4, info("shm://x", "d", 1))
	for _, tc := range []struct {
		net, addr string
		ok        bool
	}{
		{"tcp", "10.9.9.9:7480", true},
		{"tcp", "localhost:7481", true},
		{"tcp", "127.0.0.1:7481", true},
		{"tcp", "10.9.9.9:7481", false},
		{"tcp", "10.1.1.1:7482", true},
		{"tcp", "10.1.1.2:7482", false},
		{"tcp", "10.1.1.1:9999", false},
		{"udp", "10.9.9.9:7480", false},
		{"tcp", "garbage", false},
	} {
		uri, ok := tb.resolve(tc.net, tc.addr)
		if ok != tc.ok || (ok && uri != "tcp://"+tc.addr) {
			t.Errorf("resolve(%s, %s) = %q, %v; want ok %v", tc.net, tc.addr, uri, ok, tc.ok)
		}
	}
}
