package tcp

import (
	"errors"
	"runtime"
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

// TestBudget: reservations wait for free bytes, take back the buffers
// idle connections keep, and end when the device closes.
func TestBudget(t *testing.T) {
	b := newBudget(100)
	if err := b.acquire(101); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("more than the budget: %v", err)
	}
	a, c := newHold(b), newHold(b)
	if buf, err := a.get(60); buf != nil || err != nil {
		t.Fatalf("first get: %v %v", buf, err)
	}
	if b.inUse() != 60 {
		t.Fatalf("in use %d, want 60", b.inUse())
	}
	// c needs 60 too: it waits while a's buffer is in use, and gets the
	// bytes once a keeps the buffer idle.
	got := make(chan error)
	go func() {
		_, err := c.get(60)
		got <- err
	}()
	waitWaiting(b, 1)
	a.put(make([]byte, 0, 60))
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.inUse() != 60 || a.reserved != 0 || a.idle != nil {
		t.Fatalf("in use %d, a holds %d (%v)", b.inUse(), a.reserved, a.idle != nil)
	}
	// An idle buffer large enough is reused without a new reservation.
	c.put(make([]byte, 0, 60))
	if buf, err := c.get(50); cap(buf) != 60 || err != nil || b.inUse() != 60 {
		t.Fatalf("reuse: cap %d, %v, in use %d", cap(buf), err, b.inUse())
	}
	go func() {
		_, err := a.get(60)
		got <- err
	}()
	waitWaiting(b, 1)
	b.close()
	if err := <-got; !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("waiting at close: %v", err)
	}
	c.close()
	if b.inUse() != 0 {
		t.Fatalf("in use %d after every connection ended", b.inUse())
	}
}

// waitWaiting waits until n connections wait in b.acquire.
func waitWaiting(b *budget, n int) {
	for {
		b.mu.Lock()
		w := b.waiting
		b.mu.Unlock()
		if w == n {
			return
		}
		runtime.Gosched()
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "64KiB": 64 << 10, "256MiB": 256 << 20, "2GiB": 2 << 30} {
		if got, err := parseBytes(in); got != want || err != nil {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5GiB", "1TiB", "99999999999GiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
