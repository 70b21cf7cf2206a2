package ford

import "errors"

// Step is a point of a read-write transaction's commit, where
// Config.Hook is called: the crash points of the fault tests and of a
// process-kill harness.
type Step int

// Steps of a commit, in order.
const (
	// StepLocked: every written record is locked (at execution), nothing
	// validated or logged.
	StepLocked Step = iota + 1
	// StepValidated: the read set is validated.
	StepValidated
	// StepLogged: the log record is on the log node; nothing is written
	// in place.
	StepLogged
	// StepHalfWritten: half of the copies hold their new images (still
	// locked), the others nothing.
	StepHalfWritten
	// StepHalfUnlocked: every copy holds its new image, half of them
	// unlocked.
	StepHalfUnlocked
	// StepCommitted: every copy written and unlocked; the log not yet
	// truncated.
	StepCommitted
)

// String names the step.
func (s Step) String() string {
	switch s {
	case StepLocked:
		return "locked"
	case StepValidated:
		return "validated"
	case StepLogged:
		return "logged"
	case StepHalfWritten:
		return "half-written"
	case StepHalfUnlocked:
		return "half-unlocked"
	case StepCommitted:
		return "committed"
	}
	return "step?"
}

// Steps lists every step, in order.
var Steps = []Step{StepLocked, StepValidated, StepLogged, StepHalfWritten, StepHalfUnlocked, StepCommitted}

// ErrStopped is the error of a Commit that Config.Hook stopped: the
// coordinator left the transaction where the step says (its locks, its
// log) as a crash would, for recovery to find.
var ErrStopped = errors.New("ford: commit stopped by the hook")

// stop reports whether the hook stops the commit at step s.
func (db *DB) stop(s Step) bool { return db.cfg.Hook != nil && !db.cfg.Hook(s) }
