package smart

import (
	"math"
	"testing"
	"time"
)

// TestBackoffRebase follows a measured round trip: C0, the limit and
// C_max scale together, the delays with them; without RoundTrip the
// base stays put.
func TestBackoffRebase(t *testing.T) {
	b := NewBackoff(BackoffConfig{C0: time.Microsecond, Limit: 1024 * time.Microsecond, Dynamic: true, RoundTrip: true})
	now := time.Unix(0, 0)
	drive(b, 0.7, 3, &now) // C_max doubles three times: 8 × C0
	if b.CMax() != 8*time.Microsecond {
		t.Fatalf("C_max %v after 3 hot intervals, want 8µs", b.CMax())
	}
	b.Rebase(100 * time.Microsecond)
	if b.C0() != 100*time.Microsecond || b.CMax() != 800*time.Microsecond {
		t.Fatalf("after Rebase(100µs): C0 %v C_max %v, want 100µs and 800µs", b.C0(), b.CMax())
	}
	if got := b.Delay(20, 0.999999); got < 799*time.Microsecond || got > 800*time.Microsecond {
		t.Errorf("Delay(20, ~1) = %v, want about C_max (800µs)", got)
	}
	drive(b, 0.7, 20, &now)
	if b.CMax() != 102400*time.Microsecond {
		t.Errorf("C_max %v after a long hot spell, want the limit 1024 × 100µs", b.CMax())
	}
	fixed := NewBackoff(BackoffConfig{C0: time.Microsecond})
	fixed.Rebase(time.Millisecond)
	if fixed.C0() != time.Microsecond {
		t.Errorf("Rebase moved a fixed base to %v", fixed.C0())
	}
}

// TestBackoffAbandoned counts an operation that gave up as all failed
// attempts: a stream of aborts alone drives the retry rate high.
func TestBackoffAbandoned(t *testing.T) {
	b := NewBackoff(BackoffConfig{C0: time.Microsecond, Tasks: 8, Throttle: true})
	now := time.Unix(0, 0)
	b.Tick(now)
	for i := 0; i < 40; i++ {
		b.Observe(0)
		b.Abandoned(2)
	}
	now = now.Add(b.cfg.Interval)
	b.Tick(now)
	if want := 80.0 / 120; math.Abs(b.RetryRate()-want) > 1e-9 {
		t.Fatalf("retry rate %v, want %v", b.RetryRate(), want)
	}
	if b.Tasks() != 7 {
		t.Fatalf("n_max %d after a hot interval at the backoff limit, want 7", b.Tasks())
	}
}

// TestTunerMinCompletions: with too few completions per Δ to tell the
// limits apart, the tuner measures each candidate longer and compares
// rates; it picks the peak and waits no longer than 8 × Δ for a slow
// candidate.
func TestTunerMinCompletions(t *testing.T) {
	// 5 requests per millisecond at the peak (8), 4 elsewhere: 40 vs 32
	// in a Δ of 8 ms.
	peak := func(limit int) float64 {
		if limit == 8 {
			return 5
		}
		return 4
	}
	tu := NewTuner(TunerConfig{MinCompletions: 200})
	chosen := simulate(tu, 3*time.Second, peak)
	if len(chosen) == 0 || chosen[0] != 8 {
		t.Fatalf("chose %v, want 8", chosen)
	}
	_, counts := tu.Counts()
	for i, c := range counts {
		if c < 200 {
			t.Errorf("candidate %d counted %d completions, want ≥ 200", i, c)
		}
	}
	// A candidate that completes nothing ends its measurement at 8 × Δ.
	stall := func(limit int) float64 {
		if limit == 4 {
			return 0
		}
		return 5
	}
	tu = NewTuner(TunerConfig{MinCompletions: 200})
	if c := simulate(tu, 2*time.Second, stall); len(c) == 0 || c[0] != Unlimited {
		t.Fatalf("with a stalled candidate: chose %v, want unlimited", c)
	}
}
