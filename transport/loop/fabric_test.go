package loop_test

import (
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

func TestOpenURIs(t *testing.T) {
	d, err := verbs.Open("loop://uris/a")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Address() != "loop://uris/a" || d.Attr().Transport != "loop" {
		t.Fatalf("address %q transport %q", d.Address(), d.Attr().Transport)
	}
	if _, err := verbs.Open("loop://uris/a"); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("second open of an open node: %v", err)
	}
	for _, bad := range []string{"loop://uris", "loop:///a", "loop://uris/a/b", "loop://uris/"} {
		if _, err := verbs.Open(bad); !errors.Is(err, verbs.ErrBadURI) {
			t.Errorf("%s: %v, want ErrBadURI", bad, err)
		}
	}
	if _, err := verbs.Open("nosuch://x/y"); !errors.Is(err, verbs.ErrUnknownScheme) {
		t.Errorf("unknown scheme: %v", err)
	}
	if _, err := verbs.Open("::"); !errors.Is(err, verbs.ErrBadURI) {
		t.Errorf("unparsable: %v", err)
	}
}

func TestCloseFreesName(t *testing.T) {
	f := loop.Get("closefrees")
	d, err := f.Open("n")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Nodes(); len(got) != 1 || got[0] != "n" {
		t.Fatalf("nodes %v", got)
	}
	d.Close()
	if got := f.Nodes(); len(got) != 0 {
		t.Fatalf("nodes after close %v", got)
	}
	d2, err := f.Open("n")
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	d2.Close()
}

func TestKillThenRestart(t *testing.T) {
	f := loop.Get("restart")
	a, _ := f.Open("a")
	defer a.Close()
	b, _ := f.Open("b")
	if err := f.Kill("b"); err != nil {
		t.Fatal(err)
	}
	if err := f.Kill("nobody"); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("kill of unknown node: %v", err)
	}
	b2, err := f.Open("b")
	if err != nil {
		t.Fatalf("restart of killed node: %v", err)
	}
	defer b2.Close()
	if b2.ID() == b.ID() {
		t.Fatal("restarted node kept its old identity")
	}
	if f.Lookup(b2.Address()) == nil || f.LookupID(b.ID()) != nil {
		t.Fatal("lookup tables not updated on restart")
	}
	// with the dead node gone, the fabric is fault free again
	if r := f.Route(f.Lookup(a.Address()), f.Lookup(b2.Address())); r.State != 0 || r.Delay != 0 {
		t.Fatalf("route after restart %+v", r)
	}
}

func TestFaultArguments(t *testing.T) {
	f := loop.Get("faultargs")
	a, _ := f.Open("a")
	defer a.Close()
	if err := f.Partition("a", "zz"); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Error(err)
	}
	if err := f.Pause("zz"); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Error(err)
	}
	if err := f.SetLatency("a", "*", -1); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Error(err)
	}
	if err := f.SetLatency("a", "*", 1000); err != nil {
		t.Error(err)
	}
	na := f.Lookup(a.Address())
	if r := f.Route(na, na); r.Delay != 1000 {
		t.Errorf("self route delay %v", r.Delay)
	}
	if err := f.SetLatency("a", "*", 0); err != nil {
		t.Error(err)
	}
	if r := f.Route(na, na); r.Delay != 0 {
		t.Errorf("latency not removed: %v", r.Delay)
	}
}
