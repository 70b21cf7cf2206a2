package smart

import (
	"math"
	"testing"
	"time"
)

func TestThrottleCredits(t *testing.T) {
	th := NewThrottle(8, true)
	if !th.TryAcquire(6) || th.TryAcquire(3) || !th.TryAcquire(2) {
		t.Fatal("credits: 6 then 3 (refused) then 2")
	}
	if th.Outstanding() != 8 || th.Credits() != 0 {
		t.Fatalf("outstanding %d credits %d", th.Outstanding(), th.Credits())
	}
	th.SetLimit(4) // lowered below what is outstanding
	if th.Credits() != -4 || th.TryAcquire(1) {
		t.Fatalf("after lowering the limit: credits %d", th.Credits())
	}
	th.Release(6)
	if !th.TryAcquire(2) || th.TryAcquire(1) {
		t.Fatalf("after completions: credits %d", th.Credits())
	}
	// A list longer than the limit goes out when nothing is outstanding.
	th = NewThrottle(4, true)
	if !th.TryAcquire(16) {
		t.Fatal("a 16-request list never fits a limit of 4")
	}
	// Disabled: never refuses.
	th = NewThrottle(1, false)
	if !th.TryAcquire(100) {
		t.Fatal("a disabled throttle refused")
	}
}

// simulate drives a tuner with a fake clock for d, completing
// rate(limit) requests per millisecond, and returns the limits it chose
// at the end of each update phase.
func simulate(tu *Tuner, d time.Duration, rate func(limit int) float64) []int {
	now := time.Unix(1000, 0)
	var done float64
	var chosen []int
	limit, _ := tu.Tick(now, 0)
	epochs := 0
	for elapsed := time.Duration(0); elapsed < d; elapsed += time.Millisecond {
		now = now.Add(time.Millisecond)
		done += rate(limit)
		limit, _ = tu.Tick(now, uint64(done))
		if tu.Epochs() != epochs {
			epochs = tu.Epochs()
			chosen = append(chosen, limit)
		}
	}
	return chosen
}

func TestTunerPicksThePeak(t *testing.T) {
	// Throughput peaks at 8 outstanding requests, as with a small WQE cache.
	peak := func(limit int) float64 { return math.Max(100, 1000-40*math.Abs(float64(limit-8))) }
	tu := NewTuner(TunerConfig{})
	chosen := simulate(tu, 2*time.Second, peak)
	if len(chosen) < 3 {
		t.Fatalf("only %d epochs in 2 s (Δ 8 ms, stable 480 ms)", len(chosen))
	}
	for _, c := range chosen {
		if c != 8 {
			t.Fatalf("tuner chose %v, want 8 every epoch", chosen)
		}
	}
	limits, counts := tu.Counts()
	if len(limits) != 6 || limits[5] != Unlimited || counts[2] <= counts[0] {
		t.Errorf("last phase: limits %v counts %v", limits, counts)
	}
}

func TestTunerKeepsUnlimitedWithinMargin(t *testing.T) {
	// More outstanding requests never hurt: unlimited is best.
	rising := func(limit int) float64 { return 100 * math.Log(float64(limit)+1) }
	if c := simulate(NewTuner(TunerConfig{}), time.Second, rising); len(c) == 0 || c[0] != Unlimited {
		t.Fatalf("rising curve: chose %v, want unlimited", c)
	}
	// The best finite limit is only 3% better than unlimited: keep unlimited.
	slight := func(limit int) float64 {
		if limit == 10 {
			return 1030
		}
		if limit == Unlimited {
			return 1000
		}
		return 900
	}
	if c := simulate(NewTuner(TunerConfig{}), time.Second, slight); len(c) == 0 || c[0] != Unlimited {
		t.Fatalf("3%% better finite limit: chose %v, want unlimited", c)
	}
	// 10% better: take it.
	clear := func(limit int) float64 {
		if limit == 10 {
			return 1100
		}
		if limit == Unlimited {
			return 1000
		}
		return 900
	}
	if c := simulate(NewTuner(TunerConfig{}), time.Second, clear); len(c) == 0 || c[0] != 10 {
		t.Fatalf("10%% better finite limit: chose %v, want 10", c)
	}
}

func TestTunerFollowsAChangingCurve(t *testing.T) {
	// The peak moves from 4 to 12 after a second: the next epochs follow.
	now := time.Unix(0, 0)
	tu := NewTuner(TunerConfig{Delta: 8 * time.Millisecond, Stable: 100 * time.Millisecond})
	var done float64
	limit, _ := tu.Tick(now, 0)
	var last int
	for ms := 0; ms < 2000; ms++ {
		now = now.Add(time.Millisecond)
		peakAt := 4.0
		if ms >= 1000 {
			peakAt = 12
		}
		done += math.Max(100, 1000-50*math.Abs(float64(limit)-peakAt))
		limit, _ = tu.Tick(now, uint64(done))
		if !tu.Updating() {
			last = limit
		}
		if ms == 990 && last != 4 {
			t.Fatalf("before the change the tuner holds %d, want 4", last)
		}
	}
	if last != 12 {
		t.Fatalf("after the change the tuner holds %d, want 12", last)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := NewBackoff(BackoffConfig{C0: time.Microsecond, Limit: 64 * time.Microsecond})
	// Without Dynamic, C_max is the limit: the ceiling doubles per retry.
	for k, want := range map[int]time.Duration{1: 2 * time.Microsecond, 3: 8 * time.Microsecond, 6: 64 * time.Microsecond, 20: 64 * time.Microsecond} {
		if got := b.Delay(k, 0.999999); got < want-time.Nanosecond || got > want {
			t.Errorf("Delay(%d, ~1) = %v, want about %v", k, got, want)
		}
		if got := b.Delay(k, 0); got != 0 {
			t.Errorf("Delay(%d, 0) = %v", k, got)
		}
	}
}

// drive feeds a backoff controller attempts failing at rate p for ticks
// intervals (100 single-attempt outcomes each: Observe(1) is one failed
// and one successful attempt, so p·100 of them plus successes).
func drive(b *Backoff, p float64, ticks int, now *time.Time) {
	b.Tick(*now)
	for i := 0; i < ticks; i++ {
		failed := int(p*100 + 0.5)
		for op := 0; op < 100-failed; op++ {
			b.Observe(0)
		}
		for op := 0; op < failed; op++ {
			b.ops++ // a failed attempt on its own, as the rate counts them
			b.retried++
		}
		*now = now.Add(b.cfg.Interval)
		b.Tick(*now)
	}
}

func TestBackoffDynamicLimitAndTasks(t *testing.T) {
	cfg := BackoffConfig{C0: time.Microsecond, Limit: 1024 * time.Microsecond, Tasks: 8, Dynamic: true, Throttle: true}
	b := NewBackoff(cfg)
	now := time.Unix(0, 0)
	if b.CMax() != time.Microsecond || b.Tasks() != 8 {
		t.Fatalf("start: C_max %v, n_max %d", b.CMax(), b.Tasks())
	}
	// Skewed updates (70% retry): C_max doubles each interval to the limit
	// (10 steps), then n_max shrinks one per interval down to 1.
	drive(b, 0.7, 9, &now)
	if b.CMax() != 512*time.Microsecond || b.Tasks() != 8 {
		t.Fatalf("after 9 hot intervals: C_max %v, n_max %d; want 512µs, 8", b.CMax(), b.Tasks())
	}
	drive(b, 0.7, 1, &now)
	if b.CMax() != cfg.Limit || b.Tasks() != 8 {
		t.Fatalf("C_max %v n_max %d; want the limit and 8", b.CMax(), b.Tasks())
	}
	drive(b, 0.7, 20, &now)
	if b.Tasks() != 1 || b.RetryRate() != 0.7 {
		t.Fatalf("n_max %d rate %v after a long hot spell; want 1, 0.7", b.Tasks(), b.RetryRate())
	}
	// A moderate rate (between PLow and PHigh) changes nothing.
	drive(b, 0.3, 5, &now)
	if b.Tasks() != 1 || b.CMax() != cfg.Limit {
		t.Fatalf("moderate rate moved n_max %d C_max %v", b.Tasks(), b.CMax())
	}
	// Uniform updates (5% retry): C_max halves back to C0 first, then
	// n_max grows back to 8.
	drive(b, 0.05, 10, &now)
	if b.CMax() != cfg.C0 || b.Tasks() != 1 {
		t.Fatalf("after 10 cool intervals: C_max %v n_max %d; want C0 and 1", b.CMax(), b.Tasks())
	}
	drive(b, 0.05, 10, &now)
	if b.Tasks() != 8 {
		t.Fatalf("n_max %d after cooling, want 8", b.Tasks())
	}
	// Ticks closer than the interval do nothing.
	b.Observe(1)
	if b.Tick(now.Add(time.Microsecond)) {
		t.Error("a tick within the interval changed the controller")
	}
}

func TestBackoffSwitches(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBackoff(BackoffConfig{C0: time.Microsecond, Limit: 8 * time.Microsecond})
	drive(b, 0.9, 10, &now)
	if b.CMax() != 8*time.Microsecond || b.Tasks() != 8 {
		t.Fatalf("static backoff moved: C_max %v n_max %d", b.CMax(), b.Tasks())
	}
}
