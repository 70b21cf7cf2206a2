package smart_test

import (
	"context"
	"testing"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// TestRoundAllocs guards the runtime's hot path: a task's round (credits,
// posts, completions dispatched to it, the wake-up) and Enter/Leave of a
// reused task allocate nothing.
func TestRoundAllocs(t *testing.T) {
	b := newRoundBed(t, smart.Config{Throttle: true, Limit: 64, Backoff: smart.BackoffConfig{Throttle: true}})
	w := b.rt.Workers()[0]
	ctx := context.Background()
	lists := []smart.List{
		{Node: 0, WRs: []verbs.SendWR{b.write(0, 0, 0), b.read(0, 0, 8)}},
		{Node: 1, WRs: []verbs.SendWR{b.read(1, 0, 16)}},
	}
	round := func() {
		tk, err := w.Enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.DoAll(ctx, lists); err != nil {
			t.Fatal(err)
		}
		tk.Finished(0)
		tk.Leave()
	}
	round() // the task is made once
	if n := testing.AllocsPerRun(200, round); n > 0 {
		t.Errorf("a round allocates %v times", n)
	}
}
