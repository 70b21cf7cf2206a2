package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Options configure a run.
type Options struct {
	// Duration is how long each data point is measured; zero takes the
	// experiment's default (shorter with Quick).
	Duration time.Duration
	// Quick shrinks durations and sweeps so a run takes a few seconds.
	Quick bool
	// OutDir is where Run writes NAME.json, NAME.md and NAME.png; empty
	// writes nothing.
	OutDir string
	// Transport is the base of the device URIs an experiment opens, e.g.
	// "loop://bench" (nodes are appended as "/client", "/server", …).
	// Empty takes a fresh loop fabric.
	Transport string
	// Poll is the polling policy of every waiter.
	Poll verbs.PollPolicy
	// Progress receives a progress bar for runs expected to last longer
	// than ProgressAfter, if it is a terminal; nil shows none.
	Progress io.Writer
	// Log receives the harness's logs; nil discards them.
	Log *slog.Logger
	// Node builds the command that starts an rdmakit memory node in its
	// own process with the given arguments (`rdmakit node ARGS…`), for
	// experiments that need a responder in another process. The rdmakit
	// CLI sets it to re-run itself; nil makes those experiments fail with
	// ErrNoNode.
	Node func(ctx context.Context, args ...string) *exec.Cmd
	// Command builds the command that runs this rdmakit binary with the
	// given arguments (`rdmakit ARGS…`, e.g. `kv serve …`), for
	// experiments that start rdmakit's servers as a user would. The
	// rdmakit CLI sets it; nil leaves those experiments' rows out, with
	// the reason in their notes.
	Command func(ctx context.Context, args ...string) *exec.Cmd
	// Only, when not empty, keeps the rows of these systems and leaves
	// the others out (experiments that compare systems honour it; each
	// says how its systems are named): a shorter run of the comparisons
	// a user cares about. A name matches a system (case aside), or a
	// system over one transport as "NAME/TRANSPORT".
	Only []string
}

// ProgressAfter is the expected run length above which a progress bar is
// shown.
const ProgressAfter = 3 * time.Second

// Env is what an experiment runs with: the options and helpers that
// apply them.
type Env struct {
	Options
	// Log is never nil.
	Log *slog.Logger
}

func newEnv(o Options) *Env {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Env{Options: o, Log: log}
}

// Keeps reports whether the run measures system name over transport
// (empty: the system has one): Only is empty, or names it, alone or
// with the transport.
func (e *Env) Keeps(name, transport string) bool {
	if len(e.Only) == 0 {
		return true
	}
	for _, o := range e.Only {
		if strings.EqualFold(o, name) || (transport != "" && strings.EqualFold(o, name+"/"+transport)) {
			return true
		}
	}
	return false
}

// ErrNoSystem is returned by an experiment whose Options.Only names
// none of its systems.
var ErrNoSystem = errors.New("bench: no system selected")

// PointDuration is how long to measure each data point: Options.Duration
// if set, else quick with Quick, else full.
func (e *Env) PointDuration(full, quick time.Duration) time.Duration {
	switch {
	case e.Duration > 0:
		return e.Duration
	case e.Quick:
		return quick
	}
	return full
}

var fabricSeq atomic.Int64

// DeviceBase returns Options.Transport without a trailing slash or, when
// it is empty or just "loop", a fresh loop fabric named after the
// experiment, e.g. "loop://perf-1".
func (e *Env) DeviceBase(name string) string {
	t := strings.TrimRight(e.Transport, "/")
	if t == "" || t == "loop" || t == "loop:" {
		return fmt.Sprintf("loop://%s-%d", name, fabricSeq.Add(1))
	}
	return t
}

// Progress returns a progress bar over total steps, shown only when the
// run is expected to take longer than ProgressAfter and Options.Progress
// is a terminal. The returned value is never nil.
func (e *Env) Progress(total int, expected time.Duration, description string) *Progress {
	show := expected > ProgressAfter && isTerminal(e.Options.Progress)
	return newProgress(e.Options.Progress, total, description, show)
}
