package objstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSubscribe(t *testing.T) {
	s := newTestStore(t, 1<<20)
	a, b := connect(t, s), connect(t, s)
	ctx := context.Background()
	sub, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aborted := NewID()
	if _, err := a.Create(ctx, aborted, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Abort(ctx, aborted); err != nil {
		t.Fatal(err)
	}
	ids := []ID{NewID(), NewID(), NewID()}
	for _, id := range ids {
		put(t, a, id, 10, nil, 1)
	}
	for _, want := range ids {
		select {
		case got := <-sub.C():
			if got != want {
				t.Fatalf("notice %s, want %s (aborted: %s)", got, want, aborted)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no notice")
		}
	}
	if st := s.Stats(); st.Subscribers != 1 {
		t.Fatalf("Subscribers %d, want 1", st.Subscribers)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.C(); ok {
		t.Fatal("a closed subscription's channel is open")
	}
	waitFor(t, "the store to drop the subscription", func() bool { return s.Stats().Subscribers == 0 })
}

// TestSubscriberLags seals more objects than a non-reading subscriber
// can hold: it is dropped with ErrLagged, and sealing never blocks.
func TestSubscriberLags(t *testing.T) {
	s := newTestStore(t, 64<<20)
	a, b := connect(t, s), connect(t, s)
	ctx := context.Background()
	sub, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2*SubscriptionBuffer + 10 {
		id := NewID()
		put(t, a, id, 0, nil, 0)
		if err := a.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for range sub.C() {
		n++
	}
	if !errors.Is(sub.Err(), ErrLagged) || n > SubscriptionBuffer {
		t.Fatalf("read %d notices, Err %v; want at most %d and ErrLagged", n, sub.Err(), SubscriptionBuffer)
	}
	waitFor(t, "the store to drop the subscriber", func() bool { return s.Stats().Subscribers == 0 })
}
