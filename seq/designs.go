package seq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// FAA is the one-sided sequencer: the counter is 8 bytes at addr under
// rkey in the server's memory; qp is connected to the server, its
// completions go to cq, and buf (8 bytes per request in flight, at least
// slots×8) receives the counter's old values. A driver goroutine owns the
// QP: it gathers the requests waiting when it posts into one post list (one
// doorbell, whatever the number of callers) and hands completions back.
// Safe for concurrent use; at most slots requests are in flight. Close it.
type FAA struct {
	qp    verbs.QP
	cq    verbs.CQ
	buf   verbs.MR
	addr  uint64
	rkey  uint32
	poll  verbs.PollPolicy
	slots int
	reqs  chan *faaReq
	stop  chan struct{}
	done  chan struct{}

	// Completions are routed (so that others may post on the QP with
	// tags of their own); the driver goroutine dispatches them and owns
	// the slots' state.
	router      verbs.Router
	tag         verbs.Tag
	inflight    []faaRef // per slot: the call it serves
	free        []int    // free slots
	outstanding int
}

// faaReq is a call's requests: len(firsts) FETCH_AND_ADDs of n (one for
// Next). The driver fills firsts and answers on out once all are done.
type faaReq struct {
	n      uint64
	firsts []uint64
	posted int // requests posted so far
	left   int // requests not yet completed
	err    error
	out    chan faaResult
}

// faaRef is one posted request: its call and index there.
type faaRef struct {
	r *faaReq
	i int
}

type faaResult struct {
	err error
}

// NewFAA returns an FAA sequencer with slots requests in flight.
func NewFAA(qp verbs.QP, cq verbs.CQ, buf verbs.MR, addr uint64, rkey uint32, slots int, poll verbs.PollPolicy) (*FAA, error) {
	if slots <= 0 || buf.Len() < 8*slots {
		return nil, fmt.Errorf("%w: %d slots need %d bytes of buffer", verbs.ErrInvalidArg, slots, 8*slots)
	}
	f := &FAA{qp: qp, cq: cq, buf: buf, addr: addr, rkey: rkey, poll: poll, slots: slots,
		reqs: make(chan *faaReq, 4*slots), stop: make(chan struct{}), done: make(chan struct{}),
		inflight: make([]faaRef, slots), free: make([]int, 0, slots)}
	var err error
	if f.tag, err = f.router.Register(f.complete); err != nil {
		return nil, fmt.Errorf("seq: %w", err)
	}
	for i := slots - 1; i >= 0; i-- {
		f.free = append(f.free, i)
	}
	go f.drive()
	return f, nil
}

// Router is the router of the completions of the sequencer's CQ, which
// its driver goroutine dispatches: register on it to post requests of
// your own on the sequencer's QP.
func (f *FAA) Router() *verbs.Router { return &f.router }

// Next implements Sequencer with one FETCH_AND_ADD of n.
func (f *FAA) Next(ctx context.Context, n int) (uint64, error) {
	var first [1]uint64
	err := f.NextPipelined(ctx, n, first[:])
	return first[0], err
}

// NextPipelined takes len(firsts) blocks of n numbers with as many
// FETCH_AND_ADDs posted together (a pipeline, as a Redis client sends
// several commands in one write) and stores each block's first number in
// firsts. On error the blocks already taken are lost.
func (f *FAA) NextPipelined(ctx context.Context, n int, firsts []uint64) error {
	if n <= 0 || len(firsts) == 0 {
		return fmt.Errorf("%w: %d blocks of %d numbers", verbs.ErrInvalidArg, len(firsts), n)
	}
	r := &faaReq{n: uint64(n), firsts: firsts, left: len(firsts), out: make(chan faaResult, 1)}
	select {
	case f.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-f.done:
		return ErrClosed
	}
	select {
	case res := <-r.out:
		return res.err
	case <-ctx.Done():
		return ctx.Err() // the numbers are consumed; the blocks are lost
	case <-f.done:
		return ErrClosed
	}
}

// Close stops the driver; requests in flight fail with ErrClosed.
func (f *FAA) Close() error {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	return nil
}

// ErrClosed is returned by a closed sequencer.
var ErrClosed = errors.New("seq: closed")

// drive posts waiting requests as lists and completes them.
func (f *FAA) drive() {
	defer close(f.done)
	wrs := make([]verbs.SendWR, 0, f.slots)
	sgl := make([]verbs.SGE, f.slots)
	wc := make([]verbs.WC, f.slots)
	idle := 0
	var next *faaReq // a call whose requests are not all posted yet
	fail := func(err error) {
		for i, ref := range f.inflight {
			if ref.r != nil && ref.r.left > 0 {
				ref.r.left = 0
				ref.r.out <- faaResult{err: err}
			}
			f.inflight[i] = faaRef{}
		}
		if next != nil && next.left > 0 { // some of its requests never went out
			next.left = 0
			next.out <- faaResult{err: err}
		}
	}
	for {
		// Gather what waits (block only when nothing is in flight).
		wrs = wrs[:0]
		for len(f.free) > 0 {
			if next == nil {
				if f.outstanding == 0 && len(wrs) == 0 {
					select {
					case next = <-f.reqs:
					case <-f.stop:
						return
					}
				} else {
					select {
					case next = <-f.reqs:
					default:
					}
				}
				if next == nil {
					break
				}
			}
			slot := f.free[len(f.free)-1]
			f.free = f.free[:len(f.free)-1]
			f.inflight[slot] = faaRef{next, next.posted}
			sgl[slot] = verbs.SGE{Addr: f.buf.Addr() + uint64(8*slot), Length: 8, LKey: f.buf.LKey()}
			w := verbs.SendWR{ID: f.tag.ID(uint64(slot)), Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled,
				SGL: sgl[slot : slot+1], RemoteAddr: f.addr, RKey: f.rkey}
			w.Atomic.Swap[0] = next.n
			wrs = append(wrs, w)
			next.posted++
			if next.posted == len(next.firsts) {
				next = nil
			}
		}
		if len(wrs) > 0 {
			if err := f.qp.PostSend(wrs); err != nil {
				fail(err)
				return
			}
			f.outstanding += len(wrs)
		}
		// Completions: poll; when nothing moves for a while, park.
		n, err := f.cq.Poll(wc)
		if n == 0 && err == nil && len(wrs) == 0 {
			idle++
			if idle < 64 {
				runtime.Gosched()
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n, err = verbs.PollWait(ctx, f.cq, wc, f.poll)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				err = nil
			}
		}
		if n > 0 {
			idle = 0
		}
		for rest := wc[:n]; len(rest) > 0; {
			k, err := f.router.Dispatch(rest)
			if err == nil {
				break
			}
			rest = rest[k:] // another user's handler failed: route the rest
		}
		if err != nil {
			fail(err)
			return
		}
		select {
		case <-f.stop:
			fail(ErrClosed)
			return
		default:
		}
	}
}

// complete takes the completion of a slot's FETCH_AND_ADD (the router
// handler, on the driver goroutine): it stores the old value as the
// block's first number and answers the call once all its requests are
// done.
func (f *FAA) complete(wc *verbs.WC) error {
	slot := int(wc.ID & verbs.LowMask)
	if slot >= len(f.inflight) || f.inflight[slot].r == nil {
		return nil // not in flight (failed already): nothing to answer
	}
	ref := f.inflight[slot]
	f.inflight[slot] = faaRef{}
	f.free = append(f.free, slot)
	f.outstanding--
	r := ref.r
	if wc.Status != verbs.StatusSuccess {
		if r.err == nil {
			r.err = wc.Status.Err()
		}
	} else {
		r.firsts[ref.i] = binary.NativeEndian.Uint64(f.buf.Bytes()[8*slot:])
	}
	r.left--
	if r.left == 0 {
		r.out <- faaResult{err: r.err}
	}
	return nil
}

// Server methods of the RPC sequencer.
const methodNext = 1

// RPCServer is the server side of the RPC sequencer: register it on an
// rpc.Server. Its counter starts at Start.
type RPCServer struct {
	counter atomic.Uint64
}

// NewRPCServer returns a sequencer whose first number is start, with its
// handler registered on s.
func NewRPCServer(s *rpc.Server, start uint64) *RPCServer {
	r := &RPCServer{}
	r.counter.Store(start)
	s.Handle(methodNext, func(req, resp []byte) (int, error) {
		if len(req) != 4 {
			return 0, errors.New("want a 4-byte count")
		}
		n := uint64(binary.LittleEndian.Uint32(req))
		if n == 0 {
			return 0, errors.New("a count of 0")
		}
		binary.LittleEndian.PutUint64(resp, r.counter.Add(n)-n)
		return 8, nil
	})
	return r
}

// RPC is the client side of the RPC sequencer.
type RPC struct{ c *rpc.Client }

// NewRPC wraps an rpc.Client connected to an RPCServer's rpc.Server.
func NewRPC(c *rpc.Client) *RPC { return &RPC{c: c} }

// Next implements Sequencer with one call.
func (r *RPC) Next(ctx context.Context, n int) (uint64, error) {
	var req [4]byte
	var resp [8]byte
	binary.LittleEndian.PutUint32(req[:], uint32(n))
	m, err := r.c.Call(ctx, methodNext, req[:], resp[:])
	if err != nil {
		return 0, err
	}
	if m != 8 {
		return 0, fmt.Errorf("seq: a %d-byte answer", m)
	}
	return binary.LittleEndian.Uint64(resp[:]), nil
}
