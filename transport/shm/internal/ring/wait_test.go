package ring

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGoroutinesParking runs a producer and a consumer goroutine over one
// small ring with no spinning, so that both keep parking on the futex
// words, and checks every message.
func TestGoroutinesParking(t *testing.T) {
	total := 100_000
	if raceEnabled {
		total /= 4
	}
	prod, cons, _ := newPair(t, 256)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	max := prod.MaxMessage()
	var wg sync.WaitGroup
	var prodErr error
	wg.Go(func() {
		for i := range uint64(total) {
			n := msgLen(i, max)
			p, err := prod.Reserve(n)
			for err == ErrFull {
				if err = prod.WaitSpace(ctx, n, 0, nil); err == nil {
					p, err = prod.Reserve(n)
				}
			}
			if err != nil {
				prodErr = err
				return
			}
			fillMsg(p, i)
			prod.Commit()
		}
	})
	scratch := make([]byte, max)
	parks := 0
	for i := range uint64(total) {
		p, err := cons.Peek()
		for err == ErrEmpty {
			parks++
			if err = cons.Wait(ctx, 0, nil); err == nil {
				p, err = cons.Peek()
			}
		}
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("message %d: %v (producer: %v)", i, err, prodErr)
		}
		if !checkMsg(p, i, max, scratch) {
			t.Fatalf("message %d corrupted", i)
		}
		cons.Release()
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	t.Logf("consumer waited %d times", parks)
}

// TestWaitWakesParked checks that a commit wakes a consumer parked in the
// kernel at once, not at the end of a park slice.
func TestWaitWakesParked(t *testing.T) {
	prod, cons, _ := newPair(t, 256)
	done := make(chan error, 1)
	go func() { done <- cons.Wait(context.Background(), 0, nil) }()
	for atomic.LoadUint32(cons.dataWait) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(time.Millisecond) // into the futex
	start := time.Now()
	if err := prod.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= idleSlice {
		t.Errorf("woken after %v: the commit's wake-up was lost", d)
	}
	if atomic.LoadUint32(cons.dataWait) != 0 {
		t.Error("data waiter word left set")
	}
	// Likewise the producer waiting for space.
	for prod.Write(make([]byte, 24)) == nil {
	}
	go func() { done <- prod.WaitSpace(context.Background(), 24, 0, nil) }()
	for atomic.LoadUint32(prod.spaceWait) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(time.Millisecond)
	start = time.Now()
	if _, err := cons.Peek(); err != nil {
		t.Fatal(err)
	}
	cons.Release()
	cons.Release()
	if _, err := cons.Peek(); err != nil {
		t.Fatal(err)
	}
	cons.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= idleSlice {
		t.Errorf("producer woken after %v", d)
	}
}

func TestWaitReturnsAtOnce(t *testing.T) {
	prod, cons, _ := newPair(t, 256)
	if err := prod.WaitSpace(t.Context(), prod.MaxMessage(), time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := prod.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := cons.Wait(t.Context(), time.Second, nil); err != nil {
		t.Fatal(err)
	}
	// A peeked, unreleased message still counts.
	if _, err := cons.Peek(); err != nil {
		t.Fatal(err)
	}
	if err := cons.Wait(t.Context(), 0, nil); err != nil {
		t.Fatal(err)
	}
}

func TestWaitContext(t *testing.T) {
	_, cons, _ := newPair(t, 64) // empty
	prod, _, _ := newPair(t, 64) // full
	for prod.Write(nil) == nil {
	}
	for _, tc := range []struct {
		name string
		wait func(ctx context.Context) error
	}{
		{"Wait", func(ctx context.Context) error { return cons.Wait(ctx, 100*time.Microsecond, nil) }},
		{"WaitSpace", func(ctx context.Context) error { return prod.WaitSpace(ctx, 8, 0, nil) }},
	} {
		// Cancelled before the call.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := tc.wait(ctx); err != context.Canceled {
			t.Errorf("%s with a cancelled context: %v", tc.name, err)
		}
		// Cancelled while parked: the cancellation wakes it. Not woken,
		// the wait would last its whole idle slice; the margin below
		// that is what a loaded machine may take to run the woken
		// goroutine.
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(2*time.Millisecond, cancel)
		start := time.Now()
		if err := tc.wait(ctx); err != context.Canceled {
			t.Errorf("%s: %v, want context.Canceled", tc.name, err)
		}
		if d := time.Since(start); d >= idleSlice*9/10 {
			t.Errorf("%s returned %v after the call, cancelled after 2ms: it waited out its idle slice (%v)", tc.name, d, idleSlice)
		}
		// A deadline.
		ctx, cancel = context.WithTimeout(t.Context(), 10*time.Millisecond)
		if err := tc.wait(ctx); err != context.DeadlineExceeded {
			t.Errorf("%s: %v, want context.DeadlineExceeded", tc.name, err)
		}
		cancel()
	}
}

// TestWaitPeerDead simulates a peer that dies while the other side is
// parked: the liveness callback starts reporting false.
func TestWaitPeerDead(t *testing.T) {
	prod, cons, _ := newPair(t, 256)
	var dead atomic.Bool
	alive := func() bool { return !dead.Load() }
	time.AfterFunc(20*time.Millisecond, func() { dead.Store(true) })
	start := time.Now()
	if err := cons.Wait(t.Context(), 100*time.Microsecond, alive); err != ErrPeerDead {
		t.Fatalf("Wait: %v, want ErrPeerDead", err)
	}
	if d := time.Since(start); d > 20*time.Millisecond+50*time.Millisecond {
		t.Errorf("ErrPeerDead after %v, the peer died after 20ms", d)
	}
	// What a dead peer committed is still delivered first.
	if err := prod.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := cons.Wait(t.Context(), 0, alive); err != nil {
		t.Fatalf("Wait with a message from a dead peer: %v", err)
	}
	if p, err := cons.Peek(); err != nil || string(p) != "last words" {
		t.Fatalf("Peek: %q %v", p, err)
	}
	cons.Release()
	if err := cons.Wait(t.Context(), 0, alive); err != ErrPeerDead {
		t.Fatalf("Wait after draining: %v", err)
	}
	// The producer side, with a consumer that died leaving the ring full.
	for prod.Write(make([]byte, 24)) == nil {
	}
	dead.Store(false)
	time.AfterFunc(10*time.Millisecond, func() { dead.Store(true) })
	if err := prod.WaitSpace(t.Context(), 24, 0, alive); err != ErrPeerDead {
		t.Fatalf("WaitSpace: %v, want ErrPeerDead", err)
	}
	// Already dead: reported when it parks, without delay.
	start = time.Now()
	if err := prod.WaitSpace(t.Context(), 24, 0, alive); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("WaitSpace: %v, want ErrPeerDead", err)
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Errorf("ErrPeerDead for a dead peer after %v", d)
	}
}
