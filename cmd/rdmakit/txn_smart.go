package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/txn/ford"
)

// protoSmartDTX is Smart-DTX's --protocol name: a FORD client whose
// work requests Smart's runtime issues (ford.Config.Smart); its nodes
// are FORD's (`txn serve --protocol ford`).
const protoSmartDTX = "smart-dtx"

// isFord reports whether protocol p's clients are FORD's: ford, and
// smart-dtx, FORD on Smart's runtime.
func isFord(p string) bool { return p == protoFord || p == protoSmartDTX }

// smartFlags are the flags only Smart-DTX's clients read.
type smartFlags struct {
	techniques     string
	workers, tasks int
	limit          int
}

// addSmart adds Smart-DTX's flags to cmd.
func (s *smartFlags) addSmart(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.techniques, "techniques", "all", "smart-dtx: Smart's techniques on: all, none (FORD+: per-worker QPs alone) or a comma list of throttling, backoff, coroutine")
	fl.IntVar(&s.workers, "workers", 0, "smart-dtx: the runtime's workers, each with its own CQ and QPs (default GOMAXPROCS)")
	fl.IntVar(&s.tasks, "tasks", defaultSmartTasks, "smart-dtx: transactions a worker runs at once (coroutines per thread; with coroutine, the most n_max reaches)")
	fl.IntVar(&s.limit, "limit", 0, "smart-dtx, with throttling: a worker's outstanding work requests, fixed (0: tuned by Smart's epochs)")
}

// defaultSmartTasks is --tasks' default (ford.SmartConfig's).
const defaultSmartTasks = 8

// smartTechniqueNames are --techniques' words.
var smartTechniqueNames = map[string]ford.Technique{
	"throttling": ford.Throttling, "backoff": ford.Backoff, "coroutine": ford.CoroutineThrottle,
}

// parseTechniques parses --techniques: all (also empty), none, or a comma
// list of throttling, backoff and coroutine.
func parseTechniques(s string) (ford.Technique, error) {
	return parseTechniqueList("--techniques", s, ford.AllTechniques, smartTechniqueNames, errTxnFlag)
}

// config is the ford.SmartConfig the flags ask for.
func (s smartFlags) config() (*ford.SmartConfig, error) {
	t, err := parseTechniques(s.techniques)
	if err != nil {
		return nil, err
	}
	switch {
	case s.workers < 0 || s.workers > 256:
		return nil, fmt.Errorf("%w: --workers %d: want 1 to 256 (0: GOMAXPROCS)", errTxnFlag, s.workers)
	case s.tasks < 1 || s.tasks > 256:
		return nil, fmt.Errorf("%w: --tasks %d: want 1 to 256", errTxnFlag, s.tasks)
	case s.limit < 0 || s.limit > 4096:
		return nil, fmt.Errorf("%w: --limit %d: want 0 to 4096", errTxnFlag, s.limit)
	case s.limit > 0 && t&ford.Throttling == 0:
		return nil, fmt.Errorf("%w: --limit %d needs throttling in --techniques (%v)", errTxnFlag, s.limit, t)
	}
	return &ford.SmartConfig{Techniques: t, Workers: s.workers, Tasks: s.tasks, Limit: s.limit}, nil
}

// slots is the transactions the workers run at once: workers × tasks
// (--clients' default for smart-dtx).
func (s smartFlags) slots() int {
	w := s.workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	return w * max(s.tasks, 1)
}

// printSmartStats prints the techniques and each worker's figures at
// the end of a run.
func printSmartStats(w io.Writer, sc *ford.SmartConfig, stats []smart.Stats) {
	fmt.Fprintf(w, "smart         %d workers × %d tasks, techniques %v\n", len(stats), sc.Tasks, sc.Techniques)
	for i, s := range stats {
		limit := "off"
		if sc.Techniques&ford.Throttling != 0 {
			limit = fmt.Sprint(s.Limit)
		}
		fmt.Fprintf(w, "worker %-6d limit %s work requests, retry rate %.3f, n_max %d, backoff max %v, %d work requests completed\n",
			i, limit, s.RetryRate, s.Tasks, s.BackoffCMax.Round(time.Microsecond), s.Completed)
	}
}
