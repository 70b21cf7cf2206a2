package sherman

import (
	"fmt"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// Technique is one of the techniques Smart-BT applies to Sherman; a
// SmartConfig switches each on or off for an ablation.
type Technique uint8

// Smart-BT's techniques.
const (
	// Throttling is work-request throttling: a worker's lists wait for
	// credits (its outstanding work requests are bounded), the bound
	// chosen by the epoch tuner (Algorithm 1) or fixed by
	// SmartConfig.Limit.
	Throttling Technique = 1 << iota
	// Backoff is conflict-avoiding backoff: a lock CAS that finds the
	// node's global lock held waits a truncated exponential backoff with
	// a dynamic limit driven by the retry rate (smart.Task.Backoff)
	// before it tries again, instead of Sherman's yield-then-sleep.
	Backoff
	// CoroutineThrottle is task throttling: the operations a worker runs
	// at once (n_max, at most SmartConfig.Tasks) shrink while the lock
	// retry rate is high and grow back when it is low.
	CoroutineThrottle
	// SpecLookup is speculative lookup: a client cache key → (leaf,
	// entry slot, node version); a Get READs that one entry and takes it
	// when it is whole, holds the key and was written under the cached
	// node version, else falls back to reading the leaf (which refreshes
	// the cache).
	SpecLookup

	// AllTechniques is Smart-BT; none (0) is Sherman+ — Sherman on
	// per-worker QPs and CQs with Tasks operations per worker.
	AllTechniques = Throttling | Backoff | CoroutineThrottle | SpecLookup
)

// String names the techniques set ("none", or names joined by "+").
func (t Technique) String() string {
	if t == 0 {
		return "none"
	}
	s := ""
	for _, n := range []struct {
		t    Technique
		name string
	}{{Throttling, "throttling"}, {Backoff, "backoff"}, {CoroutineThrottle, "coroutine-throttle"}, {SpecLookup, "spec-lookup"}} {
		if t&n.t != 0 {
			if s != "" {
				s += "+"
			}
			s += n.name
		}
	}
	return s
}

// SmartConfig makes a client Smart-BT (Config.Smart): its operations
// run as tasks of a smart runtime, their post lists issued on the
// workers' own QPs under the techniques switched on.
type SmartConfig struct {
	// Workers is the number of workers (default GOMAXPROCS); each has
	// its own CQ and its own QP to every memory node.
	Workers int
	// Tasks is the operations a worker runs at once — Smart's
	// coroutines per thread (default 8); with CoroutineThrottle, the
	// largest n_max. The client has Workers × Tasks slots (Config.Slots
	// is not used).
	Tasks int
	// Techniques are the techniques on (default none, Sherman+; set
	// AllTechniques for Smart-BT).
	Techniques Technique
	// Limit, with Throttling, fixes a worker's outstanding work requests
	// (no tuner); 0 tunes the bound (Algorithm 1, Tuner).
	Limit int
	Tuner smart.TunerConfig
	// C0 and BackoffLimit are the backoff's base and the bound of its
	// dynamic maximum (defaults: smart.BackoffConfig's, 2 µs and 1024 ×
	// C0).
	C0, BackoffLimit time.Duration
	// SpecEntries bounds the speculative lookup cache (default 1<<20
	// keys; past it the cache starts over).
	SpecEntries int
	// Device is the client's device (the workers' CQs are made on it)
	// and Connect dials one more QP to each memory node, in the order of
	// Open's conns, sending its completions to the CQ given: each
	// worker connects once per memory node. Dial fills both; with Open
	// the caller does, and only the Region of each Conn is used.
	Device  verbs.Device
	Connect []smart.ConnectFunc
}

// withDefaults returns c with its defaults filled in.
func (c SmartConfig) withDefaults() SmartConfig {
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Tasks <= 0 {
		c.Tasks = 8
	}
	if c.SpecEntries <= 0 {
		c.SpecEntries = 1 << 20
	}
	return c
}

func (c *SmartConfig) on(t Technique) bool { return c.Techniques&t != 0 }

// runtimeConfig is the smart runtime that carries the techniques.
func (c *SmartConfig) runtimeConfig(pd verbs.PD, poll verbs.PollPolicy) (smart.Config, error) {
	if c.Device == nil || len(c.Connect) == 0 {
		return smart.Config{}, fmt.Errorf("%w: sherman: Smart needs a Device and a Connect per memory node", verbs.ErrInvalidArg)
	}
	rc := smart.Config{Device: c.Device, PD: pd, Nodes: c.Connect, Workers: c.Workers, Sharing: smart.PerWorker,
		Throttle: c.on(Throttling) && c.Limit <= 0, Tuner: c.Tuner, CQDepth: max(1024, 8*c.Tasks*len(c.Connect)), Poll: poll,
		Backoff: smart.BackoffConfig{C0: c.C0, Limit: c.BackoffLimit, Tasks: c.Tasks,
			Dynamic: c.on(Backoff), Throttle: c.on(CoroutineThrottle)}}
	if c.on(Throttling) {
		rc.Limit = c.Limit
	}
	return rc, nil
}

// SmartQPCap is the capacity a Connect's QP needs for tasks operations
// in flight on it (a worker's post fails on a full send queue): each
// posts lists of at most 4 requests, a scan's of at most 16 READs.
func SmartQPCap(tasks int) verbs.QPCap {
	return verbs.QPCap{MaxSendWR: QPDepth(tasks), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
}

// QPDepth is the send queue depth a QP to a memory node needs for ops
// operations in flight on it (Config.Slots of a Sherman client, Tasks
// of a Smart-BT worker).
func QPDepth(ops int) int { return maxRun*ops + 16 }
