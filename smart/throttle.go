package smart

// Unlimited is the work-request limit that means "no throttling" (Smart's
// public code uses 256).
const Unlimited = 256

// Throttle is Algorithm 1's credit counter: a worker may have at most
// Limit work requests outstanding. Post lists take credits for their size
// (TryAcquire), completions give them back (Release). Lowering the limit
// may leave the counter negative: posts wait until enough completions
// return. A disabled Throttle never refuses. It is not safe for concurrent
// use: it belongs to one worker.
type Throttle struct {
	limit   int
	credit  int
	enabled bool
}

// NewThrottle returns a throttle allowing limit outstanding requests.
func NewThrottle(limit int, enabled bool) *Throttle {
	return &Throttle{limit: limit, credit: limit, enabled: enabled}
}

// TryAcquire takes n credits for a post list of n requests and reports
// whether the list may be posted now.
func (t *Throttle) TryAcquire(n int) bool {
	if !t.enabled {
		t.credit -= n
		return true
	}
	if t.credit-n < 0 && !(t.credit == t.limit && n > t.limit) {
		// A list longer than the limit still goes out when nothing is
		// outstanding, so it cannot wait forever.
		return false
	}
	t.credit -= n
	return true
}

// Release gives back n credits of completed requests.
func (t *Throttle) Release(n int) { t.credit += n }

// SetLimit changes the limit (UpdateCMax): the credits move by the change.
func (t *Throttle) SetLimit(limit int) {
	t.credit += limit - t.limit
	t.limit = limit
}

// Limit returns the current limit (C_max).
func (t *Throttle) Limit() int { return t.limit }

// Credits returns the credits left (negative after a lowered limit).
func (t *Throttle) Credits() int { return t.credit }

// Outstanding returns the requests posted and not yet completed.
func (t *Throttle) Outstanding() int { return t.limit - t.credit }

// Enabled reports whether the throttle limits posts.
func (t *Throttle) Enabled() bool { return t.enabled }
