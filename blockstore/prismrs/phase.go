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
	out     int    // lists in flight
	missing uint32 // replicas of the targets that had no free slot
}

// members is the set of replicas this client uses, one bit each.
func (c *Client) members() uint32 {
	var m uint32
	for i, r := range c.reps {
		if r != nil {
			m |= 1 << i
		}
	}
	return m
}

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
		for i, r := range c.reps {
			if r == nil || targets&(1<<i) == 0 || r.dead.Load() {
				continue
			}
			live++
			if p.slots[i] == nil {
				p.slots[i] = r.tryAcquire()
			}
			if p.slots[i] != nil {
				got++
			}
		}
		if got >= need {
			for i, r := range c.reps {
				if r != nil && targets&(1<<i) != 0 && p.slots[i] == nil {
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
				c.reps[i].release(s)
			}
		}
		return nil, err
	}
}

// run posts the list build makes at every replica p holds a slot of,
// and hands each answer to take until take says it has enough, every
// list has answered, or ctx ends. A target replica that had no free slot
// (all held by lists in flight to it: it is slow, or paused) gets the
// list as soon as one frees up. The lists still in flight when run
// returns finish in the background: late (if not nil) sees their
// answers, and their slots are released as they come.
func (c *Client) run(ctx context.Context, p *phase, build func(r *rconn, s *slot) []verbs.SendWR, take func(res result) bool, late func(res result)) error {
	post := func(i int, s *slot) {
		r := c.reps[i]
		c.trips.Add(1)
		p.out++
		r.post(s, build(r, s), p.res)
	}
	for i, s := range p.slots {
		if s != nil {
			post(i, s)
		}
	}
	var err error
	for done := false; !done && (p.out > 0 || p.missing != 0); {
		var wake <-chan struct{}
		if p.missing != 0 {
			wake = c.note.wait()
			for i, r := range c.reps {
				if p.missing&(1<<i) == 0 {
					continue
				}
				if r.dead.Load() {
					p.missing &^= 1 << i
				} else if s := r.tryAcquire(); s != nil {
					p.missing &^= 1 << i
					post(i, s)
				}
			}
			if p.missing == 0 {
				continue
			}
		}
		select {
		case <-wake:
		case res := <-p.res:
			p.out--
			done = take(res)
			c.reps[res.rep].release(res.s)
		case <-ctx.Done():
			err = fmt.Errorf("%w: %w", blockstore.ErrNoQuorum, ctx.Err())
			done = true
		}
	}
	if p.out > 0 {
		go c.drain(p.res, p.out, late)
	}
	return err
}

// drain takes the n answers still to come on ch.
func (c *Client) drain(ch <-chan result, n int, late func(res result)) {
	for range n {
		res := <-ch
		if late != nil {
			late(res)
		}
		c.reps[res.rep].release(res.s)
	}
}
