package abdrpc

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/rpc"
)

// stragglerLinger is how long the calls still in flight when a phase
// returns may go on before they are cancelled.
const stragglerLinger = time.Millisecond

// errDown is a replica that is down when a setup phase asks it.
var errDown = errors.New("abdrpc: replica down")

// op is one operation's buffers and the channel its calls answer on.
// Every call runs on a goroutine of its own; the operation returns once
// it has the answers it needs, and the calls still in flight (the
// stragglers) are cancelled, answer into the channel nobody reads and
// let go of the op. The last one out recycles it, so a straggler never
// writes into a buffer that is in use again, and the buffers a client
// holds are bounded by its calls in flight.
type op struct {
	c     *Client
	req   [2][]byte   // each phase's request, read by its calls
	resp  [2][][]byte // each phase's answer buffer per replica
	res   chan reply  // room for one call in flight per replica and phase
	refs  atomic.Int32
	spare bool // back to the client's pool once free
}

// reply is a call's outcome.
type reply struct {
	phase int
	rep   int
	l     *link
	n     int
	err   error
}

// newOp makes an op for len(c.reps) replicas: phase requests of req0
// and req1 bytes, answers of up to resp0 and resp1 bytes (one more is
// allocated, so that a longer answer is seen).
func (c *Client) newOp(req0, resp0, req1, resp1 int) *op {
	n := len(c.reps)
	o := &op{c: c, req: [2][]byte{make([]byte, req0), make([]byte, req1)}, res: make(chan reply, 2*n)}
	for p, size := range [2]int{resp0, resp1} {
		o.resp[p] = make([][]byte, n)
		buf := make([]byte, n*(size+1))
		for i := range n {
			o.resp[p][i] = buf[i*(size+1) : (i+1)*(size+1)]
		}
	}
	o.refs.Store(1)
	return o
}

// getOp takes an op for a Read or Write from the pool.
func (c *Client) getOp() *op {
	o := c.ops.Get().(*op)
	o.refs.Store(1)
	return o
}

// release lets go of o: the operation's owner once done, each call once
// it has answered.
func (o *op) release() {
	if o.refs.Add(-1) != 0 {
		return
	}
	for {
		select {
		case <-o.res:
			continue
		default:
		}
		break
	}
	if o.spare {
		o.c.ops.Put(o)
	}
}

// call runs one call of phase p at replica rep over l.
func (o *op) call(ctx context.Context, l *link, p, rep int, method uint16, req []byte) {
	n, err := l.rpc.Call(ctx, method, req, o.resp[p][rep])
	o.res <- reply{phase: p, rep: rep, l: l, n: n, err: err}
	o.release()
}

// phase is one round of calls: method with the request in op.req[num]
// at every replica not in skip, until accept says it has what it
// needs.
type phase struct {
	num    int // 0 or 1: which of the op's buffers
	method uint16
	reqLen int    // bytes of op.req[num] sent
	skip   uint32 // replicas not to ask (they already answered)
	// need is the fewest answers accept may be done with: the phase
	// fails as soon as fewer replicas are left to answer.
	need int
	// accept takes a replica's answer: done when the phase has what it
	// needs; an error (the answer is garbage) counts the replica as
	// failed.
	accept func(rep int, b []byte) (done bool, err error)
	// refuse, when set, sees every replica's error answer; true ends the
	// phase with it.
	refuse func(err error) bool
	// noWait counts replicas that are down as failed instead of waiting
	// for them to come back (the setup phases, whose replicas are not
	// re-dialed).
	noWait bool
}

// run runs the phase. It waits for replicas that are down to come back
// (unless p.noWait), asks again a replica whose connection failed once
// it is back, and ends when accept is done, when too few replicas are
// left to answer, when ctx ends (blockstore.ErrNoQuorum wrapping ctx's
// error) or when the client closes.
func (o *op) run(ctx context.Context, p *phase) error {
	c := o.c
	n := len(c.reps)
	all := uint32(1)<<n - 1
	pctx, cancel := context.WithCancel(ctx)
	t := tally{final: p.skip, skip: p.skip, left: n - bits.OnesCount32(p.skip), need: p.need}
	defer func() {
		if t.inflight == 0 {
			cancel()
			return
		}
		// The stragglers' calls end after a while: long enough that
		// their requests go out (a replica left without the writes it
		// was sent lags, and costs later reads their write-back), short
		// enough that those of a replica that does not answer stay few.
		time.AfterFunc(stragglerLinger, cancel)
	}()
	req := o.req[p.num][:p.reqLen]
	for {
		if err := ctx.Err(); err != nil {
			return t.timeout(err)
		}
		up := c.upSignal()
		waiting := false
		for i, m := range c.reps {
			bit := uint32(1) << i
			if (t.final|t.inflight)&bit != 0 {
				continue
			}
			l := m.link.Load()
			if l == nil {
				if !p.noWait {
					waiting = true
				} else if err := t.fail(c, i, errDown); err != nil {
					return err
				}
				continue
			}
			t.inflight |= bit
			c.trips.Add(1)
			o.refs.Add(1)
			go o.call(pctx, l, p.num, i, p.method, req)
		}
		if t.final == all {
			return fmt.Errorf("%w: %w", blockstore.ErrNoQuorum, errors.Join(append(t.errs, errNotEnough)...))
		}
		if !waiting {
			up = nil
		}
		select {
		case r := <-o.res:
			if r.phase != p.num {
				continue // an earlier phase's straggler
			}
			t.inflight &^= 1 << r.rep
			if done, err := o.answer(p, &t, r); done || err != nil {
				return err
			}
		case <-up:
		case <-ctx.Done():
		case <-c.stop:
			return blockstore.ErrClosed
		}
	}
}

// tally is where a phase stands.
type tally struct {
	final    uint32 // replicas that answered (or failed for good), or were skipped
	skip     uint32 // replicas the phase does not ask
	inflight uint32 // replicas with a call in flight
	failed   int
	left     int // replicas the phase asks
	need     int
	errs     []error
}

// timeout is the phase's error when its context ended with err.
func (t *tally) timeout(err error) error {
	answered := bits.OnesCount32(t.final&^t.skip) - t.failed
	err = fmt.Errorf("%w: %d of %d replicas answered before the context ended: %w", blockstore.ErrNoQuorum, answered, t.left, err)
	if len(t.errs) > 0 {
		err = fmt.Errorf("%w; %w", err, errors.Join(t.errs...))
	}
	return err
}

// fail counts replica rep as failed for good; an error when too few
// replicas are left for the phase to succeed.
func (t *tally) fail(c *Client, rep int, err error) error {
	t.final |= 1 << rep
	t.failed++
	t.errs = append(t.errs, fmt.Errorf("replica %s: %w", c.reps[rep].addr, err))
	if t.left-t.failed < t.need {
		return fmt.Errorf("%w: %d of %d replicas failed: %w", blockstore.ErrNoQuorum, t.failed, t.left, errors.Join(t.errs...))
	}
	return nil
}

// answer handles a call's reply: done when the phase is, an error when
// it failed.
func (o *op) answer(p *phase, t *tally, r reply) (bool, error) {
	c := o.c
	switch {
	case r.err == nil:
		done, err := p.accept(r.rep, o.resp[p.num][r.rep][:r.n])
		if err != nil {
			return false, t.fail(c, r.rep, err)
		}
		t.final |= 1 << r.rep
		return done, nil
	case isAnswer(r.err):
		err := replica.MapErr(r.err)
		if p.refuse != nil && p.refuse(err) {
			return false, fmt.Errorf("replica %s: %w", c.reps[r.rep].addr, err)
		}
		return false, t.fail(c, r.rep, err)
	case errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded):
		return false, nil // the context ended: run reports it
	default: // the connection failed: ask again once it is back
		c.markDown(c.reps[r.rep], r.l, r.err)
		return false, nil
	}
}

// errNotEnough: every replica answered and accept was not done.
var errNotEnough = errors.New("abdrpc: the answers do not agree")

// isAnswer reports whether err is the replica's answer (its handler's
// error), not a failure of the call.
func isAnswer(err error) bool {
	var re *rpc.RemoteError
	return errors.As(err, &re) || errors.Is(err, rpc.ErrNoMethod)
}
