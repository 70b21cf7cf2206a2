package smart_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestTaskThrottleWithholdsSlots: when a high retry rate shrinks n_max,
// only n_max tasks get in (the others wait, parked, until their
// contexts end); when it falls, n_max grows and a waiting task gets in;
// Close lets a task waiting for a withheld slot in rather than leave it
// parked.
func TestTaskThrottleWithholdsSlots(t *testing.T) {
	b := newRoundBed(t, smart.Config{Backoff: smart.BackoffConfig{Tasks: 4, Throttle: true, MinSamples: 1}})
	w := b.rt.Workers()[0]
	ctx := context.Background()
	// traffic runs rounds (the poller evaluates the controller as
	// completions arrive) reporting each as an operation with retries
	// failed attempts, until done says so.
	traffic := func(retries int, done func(smart.Stats) bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !done(w.Stats()); {
			if time.Now().After(end) {
				t.Fatalf("the controller never got there: %+v", w.Stats())
			}
			tk, err := w.Enter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := tk.DoAll(ctx, []smart.List{{Node: 0, WRs: []verbs.SendWR{b.read(0, 0, 0)}}}); err != nil {
				t.Fatal(err)
			}
			if retries > 0 {
				tk.Abandoned(retries)
			} else {
				tk.Finished(0)
			}
			tk.Leave()
		}
	}
	traffic(5, func(s smart.Stats) bool { return s.Tasks <= 2 })
	n := w.Stats().Tasks
	var in []*smart.Task
	for range 4 {
		c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		tk, err := w.Enter(c)
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			continue
		}
		in = append(in, tk)
	}
	if len(in) != n {
		t.Fatalf("%d tasks got in with n_max %d", len(in), n)
	}
	// A waiting task gets in once n_max grows: the running ones leave,
	// cool traffic grows n_max back to 4.
	for _, tk := range in {
		tk.Leave()
	}
	traffic(0, func(s smart.Stats) bool { return s.Tasks == 4 })
	in = in[:0]
	for range 4 {
		c, cancel := context.WithTimeout(ctx, time.Second)
		tk, err := w.Enter(c)
		cancel()
		if err != nil {
			t.Fatalf("with n_max back at 4: %v", err)
		}
		in = append(in, tk)
	}
	for _, tk := range in {
		tk.Leave()
	}
	// Close with n_max shrunk and a task waiting for a withheld slot:
	// the waiter is let in (Close hands the withheld slots back) instead
	// of hanging, and its task's requests fail with the runtime closed.
	traffic(5, func(s smart.Stats) bool { return s.Tasks <= 2 })
	in = in[:0]
	for range w.Stats().Tasks {
		tk, err := w.Enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, tk)
	}
	entered := make(chan *smart.Task, 1)
	go func() {
		tk, err := w.Enter(ctx)
		if err != nil {
			t.Error(err)
		}
		entered <- tk
	}()
	select {
	case <-entered:
		t.Fatal("a task got in past n_max before Close")
	case <-time.After(30 * time.Millisecond):
	}
	b.rt.Close()
	select {
	case tk := <-entered:
		if tk != nil {
			if err := tk.DoAll(ctx, []smart.List{{Node: 0, WRs: []verbs.SendWR{b.read(0, 0, 0)}}}); err == nil {
				t.Error("a round after Close succeeded")
			}
			tk.Leave()
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a task waiting for a withheld slot still waits 2 s after Close")
	}
	for _, tk := range in {
		tk.Leave()
	}
}
