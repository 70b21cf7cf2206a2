package seq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// FAA is the one-sided sequencer: the counter is 8 bytes at Addr under
// RKey in the server's memory; QP is connected to the server, its
// completions go to CQ, and Buf (8 bytes per call in flight, at least
// Slots×8) receives the counter's old values. Safe for concurrent use;
// at most Slots calls are in flight.
type FAA struct {
	qp    verbs.QP
	cq    verbs.CQ
	buf   verbs.MR
	addr  uint64
	rkey  uint32
	poll  verbs.PollPolicy
	free  chan int
	waits []chan verbs.WC
	poll1 sync.Mutex // one goroutine polls at a time; it owns wc
	wc    []verbs.WC
}

// NewFAA returns an FAA sequencer with slots calls in flight.
func NewFAA(qp verbs.QP, cq verbs.CQ, buf verbs.MR, addr uint64, rkey uint32, slots int, poll verbs.PollPolicy) (*FAA, error) {
	if slots <= 0 || buf.Len() < 8*slots {
		return nil, fmt.Errorf("%w: %d slots need %d bytes of buffer", verbs.ErrInvalidArg, slots, 8*slots)
	}
	f := &FAA{qp: qp, cq: cq, buf: buf, addr: addr, rkey: rkey, poll: poll, free: make(chan int, slots), waits: make([]chan verbs.WC, slots),
		wc: make([]verbs.WC, 16)}
	for i := 0; i < slots; i++ {
		f.free <- i
		f.waits[i] = make(chan verbs.WC, 1)
	}
	return f, nil
}

// Next implements Sequencer with one FETCH_AND_ADD of n.
func (f *FAA) Next(ctx context.Context, n int) (uint64, error) {
	var slot int
	select {
	case slot = <-f.free:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { f.free <- slot }()
	w := []verbs.SendWR{{ID: uint64(slot), Opcode: verbs.OpAtomicFetchAndAdd, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: f.buf.Addr() + uint64(8*slot), Length: 8, LKey: f.buf.LKey()}},
		RemoteAddr: f.addr, RKey: f.rkey}}
	w[0].Atomic.Swap[0] = uint64(n)
	if err := f.qp.PostSend(w); err != nil {
		return 0, err
	}
	for {
		select {
		case wc := <-f.waits[slot]:
			if wc.Status != verbs.StatusSuccess {
				return 0, wc.Status.Err()
			}
			return binary.NativeEndian.Uint64(f.buf.Bytes()[8*slot:]), nil
		default:
		}
		if err := f.pollOnce(ctx); err != nil {
			return 0, err
		}
	}
}

// pollOnce polls the CQ (one goroutine at a time) and hands completions
// to their slots.
func (f *FAA) pollOnce(ctx context.Context) error {
	if !f.poll1.TryLock() {
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched() // another caller polls for us
		return nil
	}
	defer f.poll1.Unlock()
	n, err := verbs.PollWait(ctx, f.cq, f.wc, f.poll)
	for i := 0; i < n; i++ {
		f.waits[f.wc[i].ID] <- f.wc[i]
	}
	return err
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
