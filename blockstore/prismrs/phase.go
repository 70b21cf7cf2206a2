package prismrs

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/verbs"
)

// phase is one round of an operation: a list at every replica it can
// reach, until enough of them have answered.
type phase struct {
	res     chan result
	slots   [blockstore.MaxReplicas]*slot
	conns   [blockstore.MaxReplicas]*rconn // the connection of each slot
	out     int                            // lists in flight
	missing uint32                         // replicas of the targets that had no free slot
	failed  error                          // the last list that failed, if any
	need    int                            // answers wanted
}

// all is the set of the volume's replicas, one bit each.
func (c *Client) all() uint32 { return 1<<len(c.reps) - 1 }

// rep is replica i's connection, nil while there is none.
func (c *Client) rep(i int) *rconn { return c.reps[i].Load() }

// acquire takes a slot at every replica of targets that has one free,
// waiting until it holds at least need. One operation acquires at a
// time: the slots it waits for are held by lists in flight, which
// release them when they complete (or their connection fails), so no two
// operations wait for each other.
func (c *Client) acquire(ctx context.Context, targets uint32, need int) (*phase, error) {
	p := &phase{res: make(chan result, len(c.reps)), need: need}
	c.acq.Lock()
	defer c.acq.Unlock()
	for {
		wake := c.note.wait() // before looking: no release is missed
		got, live := 0, 0
		for i := range c.reps {
			r := c.rep(i)
			if targets&(1<<i) == 0 || (p.slots[i] == nil && (r == nil || r.dead.Load())) {
				continue
			}
			live++
			if p.slots[i] == nil {
				if s := r.tryAcquire(); s != nil {
					p.slots[i], p.conns[i] = s, r
				}
			}
			if p.slots[i] != nil {
				got++
			}
		}
		if got >= need {
			for i := range c.reps {
				if targets&(1<<i) != 0 && p.slots[i] == nil {
					p.missing |= 1 << i
				}
			}
			return p, nil
		}
		var err error
		if live < need {
			err = fmt.Errorf("%w: %d replicas reachable, %d needed", blockstore.ErrNoQuorum, live, need)
		} else {
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				err = fmt.Errorf("%w: %w", blockstore.ErrNoQuorum, ctx.Err())
			}
		}
		for i, s := range p.slots {
			if s != nil {
				p.conns[i].release(s)
			}
		}
		return nil, err
	}
}

// run posts the list build makes at every replica p holds a slot of,
// and hands each answer to take until take says it has enough, every
// list has answered, or ctx ends. A target replica that had no free slot
// (all held by lists in flight to it: it is slow, or paused) or no
// connection gets the list as soon as it has one, while run waits. The
// lists still in flight when run returns finish in the background: late
// (if not nil) sees their answers, and their slots are released as they
// come.
//
// With Config.Thrifty, run posts to the first p.need replicas only (in
// the replica list's order) and keeps the others in reserve: they get
// the list when one of the first fails, or has not answered within the
// thrifty wait.
func (c *Client) run(ctx context.Context, p *phase, build func(r *rconn, s *slot) []verbs.SendWR, take func(res result) bool, late func(res result)) error {
	t0 := time.Now()
	c.trips.Add(1)
	post := func(r *rconn, s *slot) {
		c.lists.Add(1)
		p.out++
		r.post(s, build(r, s), p.res)
	}
	var held, later uint32 // in reserve: slots taken but not posted; replicas without a slot
	posted := 0
	for i, s := range p.slots {
		switch {
		case s == nil:
		case c.cfg.Thrifty && posted >= p.need:
			held |= 1 << i
		default:
			post(p.conns[i], s)
			posted++
		}
	}
	var timer <-chan time.Time
	if held != 0 || (c.cfg.Thrifty && p.missing != 0) {
		later, p.missing = p.missing, 0
		t := time.NewTimer(c.thriftyWait())
		defer t.Stop()
		timer = t.C
	}
	escalate := func() {
		for i := range c.reps {
			if held&(1<<i) != 0 {
				post(p.conns[i], p.slots[i])
			}
		}
		held, p.missing, later, timer = 0, p.missing|later, 0, nil
	}
	var err error
	for done := false; !done && (p.out > 0 || p.missing != 0 || held != 0 || later != 0); {
		if p.out == 0 && (held != 0 || later != 0) {
			escalate()
		}
		var wake <-chan struct{}
		if p.missing != 0 {
			wake = c.note.wait()
			for i := range c.reps {
				if p.missing&(1<<i) == 0 {
					continue
				}
				if r := c.rep(i); r != nil {
					if s := r.tryAcquire(); s != nil {
						p.missing &^= 1 << i
						post(r, s)
					}
				}
			}
			if p.missing == 0 {
				continue
			}
			if p.out == 0 && c.reachable(p.missing) == 0 {
				break // nothing to wait for but reconnections
			}
		}
		select {
		case <-wake:
		case <-timer:
			escalate()
		case res := <-p.res:
			p.out--
			if res.err != nil {
				p.failed = res.err
				escalate()
			}
			done = take(res)
			res.r.release(res.s)
			if done {
				c.observe(time.Since(t0))
			}
		case <-ctx.Done():
			err = fmt.Errorf("%w: %w", blockstore.ErrNoQuorum, ctx.Err())
			done = true
		}
	}
	for i := range c.reps {
		if held&(1<<i) != 0 {
			p.conns[i].release(p.slots[i])
		}
	}
	if p.out > 0 {
		go drain(p.res, p.out, late)
	}
	return err
}

// observe folds a phase's duration into the client's moving average.
func (c *Client) observe(d time.Duration) {
	avg := c.phaseAvg.Load()
	c.phaseAvg.Store(avg + (int64(d)-avg)/8)
}

// thriftyWait is how long a thrifty phase waits for its first replicas
// before it posts to the others: Config.ThriftyWait, or 4 times the
// phases' moving average when that is longer.
func (c *Client) thriftyWait() time.Duration {
	return max(c.cfg.ThriftyWait, 4*time.Duration(c.phaseAvg.Load()))
}

// reachable counts the replicas of set with a live connection.
func (c *Client) reachable(set uint32) int {
	n := 0
	for i := range c.reps {
		if r := c.rep(i); set&(1<<i) != 0 && r != nil && !r.dead.Load() {
			n++
		}
	}
	return n
}

// drain takes the n answers still to come on ch.
func drain(ch <-chan result, n int, late func(res result)) {
	for range n {
		res := <-ch
		if late != nil {
			late(res)
		}
		res.r.release(res.s)
	}
}
