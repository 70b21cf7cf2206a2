package verbs

import (
	"context"
	"fmt"
	"runtime"
)

// PollPolicy says how a waiter polls a CQ: Spin busy polls, then Yield
// polls each after runtime.Gosched, then, if Park, it arms the CQ and
// sleeps in Wait until a completion event. Two busy pollers starve each
// other on a 2-core machine; parking bounds the damage.
type PollPolicy struct {
	Spin  int
	Yield int
	Park  bool
}

// Polling policies.
var (
	// PollAdaptive spins briefly, yields a while, then parks: the default.
	PollAdaptive = PollPolicy{Spin: 64, Yield: 16, Park: true}
	// PollBusy spins, yielding the processor between polls, and never
	// parks: lowest latency, one core per poller.
	PollBusy = PollPolicy{Spin: 1 << 30, Yield: 0, Park: false}
	// PollEvent arms the CQ and waits for an event right away: least CPU.
	PollEvent = PollPolicy{Park: true}
)

// String names the policy: "adaptive", "busy" or "event" for the
// predefined ones (ParsePollPolicy reads them back), else the parameters,
// e.g. "spin=10,yield=5,park".
func (p PollPolicy) String() string {
	switch p {
	case PollAdaptive:
		return "adaptive"
	case PollBusy:
		return "busy"
	case PollEvent:
		return "event"
	}
	s := fmt.Sprintf("spin=%d,yield=%d", p.Spin, p.Yield)
	if p.Park {
		s += ",park"
	}
	return s
}

// ParsePollPolicy parses "adaptive", "busy" or "event".
func ParsePollPolicy(s string) (PollPolicy, error) {
	switch s {
	case "adaptive", "":
		return PollAdaptive, nil
	case "busy", "spin":
		return PollBusy, nil
	case "event", "park":
		return PollEvent, nil
	}
	return PollPolicy{}, fmt.Errorf("%w: poll policy %q (want adaptive, busy or event)", ErrInvalidArg, s)
}

// PollWait polls cq until it returns at least one completion, following
// the policy, and returns the number of completions stored in wc. It
// returns ctx's error when ctx ends first, and Poll's error (e.g.
// ErrCQOverrun) as soon as Poll reports one.
func PollWait(ctx context.Context, cq CQ, wc []WC, p PollPolicy) (int, error) {
	for i := 0; i < p.Spin; i++ {
		n, err := cq.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if i&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			runtime.Gosched()
		}
	}
	for i := 0; i < p.Yield || !p.Park; i++ {
		runtime.Gosched()
		n, err := cq.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if i&63 == 63 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
	}
	for {
		if err := cq.ReqNotify(false); err != nil {
			return 0, err
		}
		n, err := cq.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if err := cq.Wait(ctx); err != nil {
			return 0, err
		}
		n, err = cq.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
	}
}
