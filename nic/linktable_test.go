package nic

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLink is a DialedLink that does nothing but die.
type fakeLink struct {
	Link
	address string
	dead    atomic.Bool
}

func (l *fakeLink) Dead() bool { return l.dead.Load() }

func TestLinkTableDialsOncePerPeer(t *testing.T) {
	var tab LinkTable[*fakeLink]
	var dials atomic.Int32
	release := make(chan struct{})
	dial := func() (*fakeLink, error) {
		dials.Add(1)
		<-release
		return &fakeLink{address: "a"}, nil
	}
	const callers = 16
	got := make([]*fakeLink, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := tab.Get("a", dial)
			if err != nil {
				t.Error(err)
			}
			got[i] = l
		}()
	}
	// Let the callers pile up behind the first dial.
	for dials.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials for one peer, want 1", n)
	}
	for i, l := range got {
		if l != got[0] {
			t.Fatalf("caller %d got another link", i)
		}
	}
	if s := tab.Snapshot(); len(s) != 1 || s[0] != got[0] {
		t.Fatalf("snapshot %v, want the one link", s)
	}
}

func TestLinkTableSharesDialErrorAndRetries(t *testing.T) {
	var tab LinkTable[*fakeLink]
	boom := errors.New("unreachable")
	if _, err := tab.Get("a", func() (*fakeLink, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if len(tab.Snapshot()) != 0 {
		t.Fatal("a failed dial left a link")
	}
	l, err := tab.Get("a", func() (*fakeLink, error) { return &fakeLink{address: "a"}, nil })
	if err != nil || l == nil {
		t.Fatalf("second dial: %v %v", l, err)
	}
}

func TestLinkTableReplacesDeadLink(t *testing.T) {
	var tab LinkTable[*fakeLink]
	first, _ := tab.Get("a", func() (*fakeLink, error) { return &fakeLink{address: "a"}, nil })
	first.dead.Store(true)
	second, _ := tab.Get("a", func() (*fakeLink, error) { return &fakeLink{address: "a"}, nil })
	if second == first {
		t.Fatal("a dead link was handed out again")
	}
	// The old link's late Forget must not drop its replacement.
	tab.Forget("a", first)
	if l, ok := tab.Lookup("a"); !ok || l != second {
		t.Fatal("Forget of a replaced link dropped the new one")
	}
	tab.Forget("a", second)
	if _, ok := tab.Lookup("a"); ok || len(tab.Snapshot()) != 0 {
		t.Fatal("Forget left the link")
	}
}
