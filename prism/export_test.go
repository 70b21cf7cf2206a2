package prism

import "time"

// SetClock has r read the time from now (for HoleGrace).
func SetClock(r *ReturnRing, now func() time.Time) { r.now = now }
