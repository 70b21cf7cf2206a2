package prismrs

import (
	"context"
	"fmt"

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
	p := &phase{res: make(chan result, len(c.reps))}
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
func (c *Client) run(ctx context.Context, p *phase, build func(r *rconn, s *slot) []verbs.SendWR, take func(res result) bool, late func(res result)) error {
	c.trips.Add(1)
	post := func(r *rconn, s *slot) {
		c.lists.Add(1)
		p.out++
		r.post(s, build(r, s), p.res)
	}
	for i, s := range p.slots {
		if s != nil {
			post(p.conns[i], s)
		}
	}
	var err error
	for done := false; !done && (p.out > 0 || p.missing != 0); {
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
		case res := <-p.res:
			p.out--
			if res.err != nil {
				p.failed = res.err
			}
			done = take(res)
			res.r.release(res.s)
		case <-ctx.Done():
			err = fmt.Errorf("%w: %w", blockstore.ErrNoQuorum, ctx.Err())
			done = true
		}
	}
	if p.out > 0 {
		go drain(p.res, p.out, late)
	}
	return err
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
