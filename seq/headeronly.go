package seq

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// The header-only design carries no payload at all: a request is a
// SEND_WITH_IMM of 0 bytes whose immediate is the client's guess of the
// high 32 bits of the next number; the server answers with a
// SEND_WITH_IMM of 0 bytes carrying the low 32 bits. When the guess is
// wrong the server consumes no number and answers SOLICITED with the
// correct high bits; the client asks again.

// HeaderOnlyServer serves header-only requests on one connection.
type HeaderOnlyServer struct {
	mu      sync.Mutex
	counter uint64
}

// NewHeaderOnlyServer returns a server whose first number is start.
func NewHeaderOnlyServer(start uint64) *HeaderOnlyServer { return &HeaderOnlyServer{counter: start} }

// Serve answers the requests arriving on qp (its completions on cq) with
// recvs receives posted, until ctx ends. Any number of connections may be
// served at once; they share the counter.
func (s *HeaderOnlyServer) Serve(ctx context.Context, qp verbs.QP, cq verbs.CQ, recvs int, poll verbs.PollPolicy) error {
	r := make([]verbs.RecvWR, recvs)
	for i := range r {
		r[i] = verbs.RecvWR{ID: uint64(i)}
	}
	if err := qp.PostRecv(r); err != nil {
		return err
	}
	wc := make([]verbs.WC, 64)
	answers := make([]verbs.SendWR, 0, 64)
	sent := 0
	for {
		n, err := verbs.PollWait(ctx, cq, wc, poll)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		answers = answers[:0]
		reposts := 0
		for i := 0; i < n; i++ {
			w := &wc[i]
			if w.Status != verbs.StatusSuccess {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("seq: header-only server: %w", w.Status.Err())
			}
			if w.Opcode != verbs.WCRecv {
				continue
			}
			reposts++
			s.mu.Lock()
			hi := uint32(s.counter >> 32)
			a := verbs.SendWR{Opcode: verbs.OpSendWithImm}
			if w.Flags&verbs.WCWithImm == 0 || w.Imm != hi {
				a.Imm, a.Flags = hi, verbs.FlagSolicited // wrong guess: here are the high bits
			} else {
				a.Imm = uint32(s.counter)
				s.counter++
			}
			s.mu.Unlock()
			sent++
			if sent%16 == 0 {
				a.Flags |= verbs.FlagSignaled // selective signaling frees send-queue slots
			}
			answers = append(answers, a)
		}
		if reposts > 0 {
			if err := qp.PostRecv(r[:reposts]); err != nil {
				return err
			}
		}
		if len(answers) > 0 {
			if err := qp.PostSend(answers); err != nil {
				return err
			}
		}
	}
}

// HeaderOnly is the client of the header-only design; one number per
// request. A poller goroutine takes the answers, which come back in
// request order, and hands them to the waiting callers. Safe for
// concurrent use. Close it.
type HeaderOnly struct {
	qp      verbs.QP
	cq      verbs.CQ
	poll    verbs.PollPolicy
	mu      sync.Mutex // posting, the guess and the queue of waiters
	guess   uint32
	waiters []chan verbs.WC
	sent    int
	stop    context.CancelFunc
	done    chan struct{}
}

// NewHeaderOnly starts a client on qp (completions on cq) with recvs
// receives posted for answers.
func NewHeaderOnly(qp verbs.QP, cq verbs.CQ, recvs int, poll verbs.PollPolicy) (*HeaderOnly, error) {
	r := make([]verbs.RecvWR, recvs)
	for i := range r {
		r[i] = verbs.RecvWR{ID: uint64(i)}
	}
	if err := qp.PostRecv(r); err != nil {
		return nil, err
	}
	h := &HeaderOnly{qp: qp, cq: cq, poll: poll, done: make(chan struct{})}
	var ctx context.Context
	ctx, h.stop = context.WithCancel(context.Background())
	go h.run(ctx)
	return h, nil
}

// ErrOneAtATime is returned for a request of more than one number.
var ErrOneAtATime = errors.New("seq: the header-only sequencer hands out one number per request")

// Next implements Sequencer for n = 1.
func (h *HeaderOnly) Next(ctx context.Context, n int) (uint64, error) {
	if n != 1 {
		return 0, ErrOneAtATime
	}
	for {
		done := make(chan verbs.WC, 1)
		h.mu.Lock()
		guess := h.guess
		w := []verbs.SendWR{{Opcode: verbs.OpSendWithImm, Imm: guess}}
		h.sent++
		if h.sent%16 == 0 {
			w[0].Flags |= verbs.FlagSignaled
		}
		if err := h.qp.PostSend(w); err != nil {
			h.mu.Unlock()
			return 0, err
		}
		h.waiters = append(h.waiters, done)
		h.mu.Unlock()
		var a verbs.WC
		select {
		case a = <-done:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-h.done:
			return 0, ErrClosed
		}
		if a.Status != verbs.StatusSuccess {
			return 0, a.Status.Err()
		}
		if a.Flags&verbs.WCSolicited != 0 {
			h.mu.Lock()
			h.guess = a.Imm // a wrong guess: ask again with the server's high bits
			h.mu.Unlock()
			continue
		}
		return uint64(guess)<<32 | uint64(a.Imm), nil
	}
}

// Close stops the poller; waiting callers get ErrClosed.
func (h *HeaderOnly) Close() error {
	h.stop()
	<-h.done
	return nil
}

// run takes answers and hands them to the waiters in order, reposting the
// receives.
func (h *HeaderOnly) run(ctx context.Context) {
	defer close(h.done)
	wc := make([]verbs.WC, 64)
	recv := [1]verbs.RecvWR{}
	for {
		n, err := verbs.PollWait(ctx, h.cq, wc, h.poll)
		if err != nil {
			return
		}
		for i := 0; i < n; i++ {
			w := wc[i]
			if w.Opcode != verbs.WCRecv {
				if w.Status == verbs.StatusSuccess {
					continue // a signaled request's completion
				}
			} else {
				recv[0] = verbs.RecvWR{ID: w.ID}
				if err := h.qp.PostRecv(recv[:]); err != nil {
					return
				}
			}
			h.mu.Lock()
			if len(h.waiters) > 0 {
				c := h.waiters[0]
				h.waiters = h.waiters[1:]
				c <- w
			}
			h.mu.Unlock()
		}
	}
}
