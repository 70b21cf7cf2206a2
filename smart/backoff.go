package smart

import "time"

// BackoffConfig configures conflict avoidance. Zero fields take Smart's
// defaults.
type BackoffConfig struct {
	// C0 is the base backoff: about one round trip (default 2 µs, Smart's
	// 4096 cycles).
	C0 time.Duration
	// Limit bounds the dynamic maximum C_max (default 1024 × C0).
	Limit time.Duration
	// PHigh and PLow are the retry rates above which C_max doubles and
	// below which it halves (defaults 0.5 and 0.1).
	PHigh, PLow float64
	// Interval is how often the retry rate is evaluated (default 1 ms);
	// an evaluation waits until MinSamples operations finished since the
	// last one (default 32), so a slow interval does not decide on noise.
	Interval   time.Duration
	MinSamples int
	// Tasks is the initial and largest number of tasks a worker runs at
	// once (n_max; default 8); MinTasks the smallest (default 1).
	Tasks, MinTasks int
	// Dynamic enables the dynamic C_max (else it stays at Limit, plain
	// truncated exponential backoff); Throttle enables task throttling.
	Dynamic, Throttle bool
	// RoundTrip makes C0 follow the worker's measured round trip
	// (Rebase): Smart's C0 is about one round trip, 4096 cycles on its
	// NIC, and a software transport's round trip is tens to hundreds of
	// times that. C0 is then the starting base, and Limit keeps its
	// ratio to C0 (default 1024).
	RoundTrip bool
}

func (c *BackoffConfig) defaults() {
	if c.C0 == 0 {
		c.C0 = 2 * time.Microsecond
	}
	if c.Limit == 0 {
		c.Limit = 1024 * c.C0
	}
	if c.PHigh == 0 {
		c.PHigh = 0.5
	}
	if c.PLow == 0 {
		c.PLow = 0.1
	}
	if c.Interval == 0 {
		c.Interval = time.Millisecond
	}
	if c.MinSamples == 0 {
		c.MinSamples = 32
	}
	if c.Tasks == 0 {
		c.Tasks = 8
	}
	if c.MinTasks == 0 {
		c.MinTasks = 1
	}
}

// Backoff is Smart's conflict avoidance for one worker: truncated
// exponential backoff between retries, a maximum C_max that follows the
// retry rate, and the number of tasks allowed to run at once (n_max),
// changed only once C_max sits at a bound. Operations report how many
// times they retried (Observe); Tick, called with the time, re-evaluates every
// Interval. It never reads a clock or a random source itself. Not safe for
// concurrent use.
type Backoff struct {
	cfg      BackoffConfig
	c0       time.Duration // the base (cfg.C0, or the round trip)
	limit    time.Duration // the bound of cmax
	cmax     time.Duration
	tasks    int
	ops      uint64
	retried  uint64
	lastTick time.Time
	rate     float64
}

// NewBackoff returns a controller starting at C_max = C0 (with Dynamic)
// or Limit, and n_max = Tasks.
func NewBackoff(c BackoffConfig) *Backoff {
	c.defaults()
	b := &Backoff{cfg: c, c0: c.C0, limit: c.Limit, cmax: c.Limit, tasks: c.Tasks}
	if c.Dynamic {
		b.cmax = c.C0
	}
	return b
}

// Delay is the wait before retry k (k = 1 for the first retry): a uniform
// draw from [0, min(C_max, C0·2^k)] given r uniform in [0, 1).
func (b *Backoff) Delay(k int, r float64) time.Duration {
	ceil := b.c0
	for i := 0; i < k && ceil < b.cmax; i++ {
		ceil *= 2
	}
	ceil = min(ceil, b.cmax)
	return time.Duration(r * float64(ceil+1))
}

// Observe records one finished operation that took retries retries
// (failed attempts) before it succeeded. The retry rate is the share of
// attempts that failed: an operation that retried many times weighs more
// than one that retried once, so a heavy tail of retries is not mistaken
// for mild contention.
func (b *Backoff) Observe(retries int) {
	b.ops += uint64(retries) + 1
	b.retried += uint64(retries)
}

// Tick re-evaluates at now if an Interval has passed since the last
// evaluation and MinSamples attempts were observed: p = share of attempts
// that failed; p > PHigh doubles
// C_max, or at the limit shrinks n_max; p < PLow halves C_max, or at C0
// grows n_max. It reports whether anything changed.
func (b *Backoff) Tick(now time.Time) bool {
	if b.lastTick.IsZero() {
		b.lastTick = now
		return false
	}
	if now.Sub(b.lastTick) < b.cfg.Interval || b.ops < uint64(b.cfg.MinSamples) {
		return false
	}
	b.lastTick = now
	p := float64(b.retried) / float64(b.ops)
	b.rate = p
	b.ops, b.retried = 0, 0
	oldC, oldT := b.cmax, b.tasks
	switch {
	case p > b.cfg.PHigh:
		if b.cfg.Dynamic && b.cmax < b.limit {
			b.cmax = min(2*b.cmax, b.limit)
		} else if b.cfg.Throttle && b.tasks > b.cfg.MinTasks {
			b.tasks--
		}
	case p < b.cfg.PLow:
		if b.cfg.Dynamic && b.cmax > b.c0 {
			b.cmax = max(b.cmax/2, b.c0)
		} else if b.cfg.Throttle && b.tasks < b.cfg.Tasks {
			b.tasks++
		}
	}
	return b.cmax != oldC || b.tasks != oldT
}

// Abandoned records one operation that gave up (a transaction that
// aborted, say) after failures failed attempts, counting every one of
// them as a retry: giving up is contention as much as retrying is.
func (b *Backoff) Abandoned(failures int) {
	b.ops += uint64(failures)
	b.retried += uint64(failures)
}

// Rebase sets C0 to rtt, the worker's measured round trip, when the
// controller follows it (BackoffConfig.RoundTrip; else it does nothing):
// the limit and C_max keep their ratios to C0.
func (b *Backoff) Rebase(rtt time.Duration) {
	if !b.cfg.RoundTrip || rtt <= 0 || rtt == b.c0 {
		return
	}
	scale := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) / float64(b.c0) * float64(rtt))
	}
	b.limit, b.cmax = scale(b.limit), scale(b.cmax)
	b.c0 = rtt
}

// C0 returns the current base of the backoff.
func (b *Backoff) C0() time.Duration { return b.c0 }

// CMax returns the current backoff maximum.
func (b *Backoff) CMax() time.Duration { return b.cmax }

// Tasks returns n_max, the tasks a worker may run at once.
func (b *Backoff) Tasks() int { return b.tasks }

// RetryRate returns the retry rate measured at the last evaluation.
func (b *Backoff) RetryRate() float64 { return b.rate }
