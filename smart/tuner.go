package smart

import "time"

// TunerConfig configures the epoch tuner of work-request throttling.
type TunerConfig struct {
	// Candidates are the finite limits tried in each update phase
	// (default 4, 6, 8, 10, 12).
	Candidates []int
	// Unlimited is tried too (default Unlimited, 256); it is kept unless
	// the best finite limit completes more than Margin more requests.
	Unlimited int
	// Margin is that advantage (default 0.05: 5%).
	Margin float64
	// Delta is how long each candidate is measured (default 8 ms).
	Delta time.Duration
	// MinCompletions, when set, extends a candidate's measurement past
	// Delta until it counted that many completions (at most 8 × Delta),
	// and candidates are then compared by rate: Smart's Δ sees tens of
	// thousands of requests at a NIC's rate, a slower transport's only
	// a few hundred, too few to tell 5% apart.
	MinCompletions uint64
	// Stable is the stable phase after an update (default 60 × Delta).
	Stable time.Duration
}

func (c *TunerConfig) defaults() {
	if len(c.Candidates) == 0 {
		c.Candidates = []int{4, 6, 8, 10, 12}
	}
	if c.Unlimited == 0 {
		c.Unlimited = Unlimited
	}
	if c.Margin == 0 {
		c.Margin = 0.05
	}
	if c.Delta == 0 {
		c.Delta = 8 * time.Millisecond
	}
	if c.Stable == 0 {
		c.Stable = 60 * c.Delta
	}
}

// Tuner runs Algorithm 1's epochs: an update phase that tries every
// candidate limit for Delta and keeps the one that completed the most work
// requests, then a stable phase. It is driven by Tick with the time and
// the worker's cumulative completion count, and tells the caller which
// limit to apply; it never reads a clock itself.
type Tuner struct {
	cfg    TunerConfig
	order  []int // the limits of an update phase: candidates, then unlimited
	phase  int   // index into order while updating; len(order) when stable
	start  time.Time
	base   uint64 // completions at the start of the current measurement
	counts []uint64
	spans  []time.Duration // how long each was measured
	limit  int
	epochs int
}

// NewTuner returns a tuner; its first Tick starts an update phase.
func NewTuner(c TunerConfig) *Tuner {
	c.defaults()
	t := &Tuner{cfg: c, order: append(append([]int(nil), c.Candidates...), c.Unlimited), limit: c.Unlimited}
	t.counts = make([]uint64, len(t.order))
	t.spans = make([]time.Duration, len(t.order))
	t.phase = -1
	return t
}

// Limit returns the limit the tuner wants now.
func (t *Tuner) Limit() int { return t.limit }

// Epochs returns the number of update phases completed.
func (t *Tuner) Epochs() int { return t.epochs }

// Updating reports whether an update phase is in progress.
func (t *Tuner) Updating() bool { return t.phase >= 0 && t.phase < len(t.order) }

// Tick advances the tuner to now, given the total of completed work
// requests so far. It returns the limit to apply from now on and whether
// it changed.
func (t *Tuner) Tick(now time.Time, completed uint64) (limit int, changed bool) {
	old := t.limit
	switch {
	case t.phase < 0: // first tick: start updating
		t.beginUpdate(now, completed)
	case t.phase < len(t.order):
		span := now.Sub(t.start)
		if span < t.cfg.Delta || completed-t.base < t.cfg.MinCompletions && span < 8*t.cfg.Delta {
			break
		}
		t.counts[t.phase], t.spans[t.phase] = completed-t.base, span
		t.phase++
		t.start, t.base = now, completed
		if t.phase < len(t.order) {
			t.limit = t.order[t.phase]
			break
		}
		t.limit = t.choose()
		t.epochs++
	default: // stable
		if now.Sub(t.start) >= t.cfg.Stable {
			t.beginUpdate(now, completed)
		}
	}
	return t.limit, t.limit != old
}

func (t *Tuner) beginUpdate(now time.Time, completed uint64) {
	t.phase = 0
	t.start, t.base = now, completed
	t.limit = t.order[0]
	clear(t.counts)
	clear(t.spans)
}

// choose picks the winner of an update phase: the finite candidate with
// the most completions, unless unlimited is within Margin of it.
func (t *Tuner) choose() int {
	n := len(t.cfg.Candidates)
	best := 0
	for i := 1; i < n; i++ {
		if t.score(i) > t.score(best) {
			best = i
		}
	}
	if t.score(best) > (1+t.cfg.Margin)*t.score(n) {
		return t.order[best]
	}
	return t.cfg.Unlimited
}

// score is what candidate i achieved: its completions, or with
// MinCompletions its completions per second (measurements then differ in
// length).
func (t *Tuner) score(i int) float64 {
	if t.cfg.MinCompletions == 0 || t.spans[i] <= 0 {
		return float64(t.counts[i])
	}
	return float64(t.counts[i]) / t.spans[i].Seconds()
}

// Counts returns the completions each limit of the last update phase
// achieved, in the order tried (candidates, then unlimited).
func (t *Tuner) Counts() (limits []int, counts []uint64) {
	return append([]int(nil), t.order...), append([]uint64(nil), t.counts...)
}
