package main

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/rdmakit/rdmakit/btree/sherman"
)

// errBTreeFlag marks a btree command's flag that cannot work.
var errBTreeFlag = errors.New("btree: bad flag")

// btreeSmartNames are --smart's words.
var btreeSmartNames = map[string]sherman.Technique{
	"throttling": sherman.Throttling, "backoff": sherman.Backoff,
	"coroutine": sherman.CoroutineThrottle, "spec": sherman.SpecLookup,
}

// btreeSmartFlags make a Sherman client Smart-BT: its operations run as
// tasks of Smart's workers under the techniques --smart switches on.
type btreeSmartFlags struct {
	techniques string // empty: plain Sherman
	workers    int
	limit      int
}

func (s *btreeSmartFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.techniques, "smart", "", "sherman: run on Smart's runtime with these techniques on: all (Smart-BT), none (Sherman+: per-worker QPs alone) or a comma list of throttling, backoff, coroutine, spec (speculative lookup); empty: plain Sherman")
	f.IntVar(&s.workers, "workers", 0, "with --smart: the runtime's workers, each with its own CQ and QP to the node (default GOMAXPROCS)")
	f.IntVar(&s.limit, "wr-limit", 0, "with --smart including throttling: a worker's outstanding work requests, fixed (0: tuned by Smart's epochs)")
}

// config is the sherman.SmartConfig the flags ask for a client with
// slots operations in flight (nil: plain Sherman): slots spread over the
// workers.
func (s btreeSmartFlags) config(design string, slots int) (*sherman.SmartConfig, error) {
	if s.techniques == "" {
		if s.workers != 0 || s.limit != 0 {
			return nil, fmt.Errorf("%w: --workers and --wr-limit need --smart", errBTreeFlag)
		}
		return nil, nil
	}
	if design != "sherman" {
		return nil, fmt.Errorf("%w: --smart is for --design sherman, not %s", errBTreeFlag, design)
	}
	t, err := parseTechniqueList("--smart", s.techniques, sherman.AllTechniques, btreeSmartNames, errBTreeFlag)
	if err != nil {
		return nil, err
	}
	switch {
	case s.workers < 0 || s.workers > 256:
		return nil, fmt.Errorf("%w: --workers %d: want 1 to 256 (0: GOMAXPROCS)", errBTreeFlag, s.workers)
	case s.limit < 0 || s.limit > 4096:
		return nil, fmt.Errorf("%w: --wr-limit %d: want 0 to 4096", errBTreeFlag, s.limit)
	case s.limit > 0 && t&sherman.Throttling == 0:
		return nil, fmt.Errorf("%w: --wr-limit %d needs throttling in --smart (%v)", errBTreeFlag, s.limit, t)
	}
	w := s.workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	w = min(w, max(slots, 1))
	return &sherman.SmartConfig{Techniques: t, Workers: w, Tasks: (max(slots, 1) + w - 1) / w, Limit: s.limit}, nil
}
