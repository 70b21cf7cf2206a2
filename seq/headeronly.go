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
	c := &headerOnlyConn{s: s, answers: make([]verbs.SendWR, 0, 64)}
	var router verbs.Router
	var err error
	if c.tag, err = router.Register(c.complete); err != nil {
		return err
	}
	r := make([]verbs.RecvWR, recvs)
	for i := range r {
		r[i] = verbs.RecvWR{ID: c.tag.ID(uint64(i))}
	}
	if err := qp.PostRecv(r); err != nil {
		return err
	}
	wc := make([]verbs.WC, 64)
	for {
		n, err := verbs.PollWait(ctx, cq, wc, poll)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		c.answers, c.reposts = c.answers[:0], 0
		if _, err := router.Dispatch(wc[:n]); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if c.reposts > 0 {
			if err := qp.PostRecv(r[:c.reposts]); err != nil {
				return err
			}
		}
		if len(c.answers) > 0 {
			if err := qp.PostSend(c.answers); err != nil {
				return err
			}
		}
	}
}

// headerOnlyConn is a connection's state in Serve: the answers to the
// requests of one poll, posted together.
type headerOnlyConn struct {
	s       *HeaderOnlyServer
	tag     verbs.Tag
	answers []verbs.SendWR
	reposts int // receives consumed
	sent    int
}

// complete answers a request (the router handler); an error completion
// ends Serve.
func (c *headerOnlyConn) complete(w *verbs.WC) error {
	if w.Status != verbs.StatusSuccess {
		return fmt.Errorf("seq: header-only server: %w", w.Status.Err())
	}
	if w.Opcode != verbs.WCRecv {
		return nil
	}
	c.reposts++
	c.s.mu.Lock()
	hi := uint32(c.s.counter >> 32)
	a := verbs.SendWR{ID: c.tag.ID(0), Opcode: verbs.OpSendWithImm}
	if w.Flags&verbs.WCWithImm == 0 || w.Imm != hi {
		a.Imm, a.Flags = hi, verbs.FlagSolicited // wrong guess: here are the high bits
	} else {
		a.Imm = uint32(c.s.counter)
		c.s.counter++
	}
	c.s.mu.Unlock()
	c.sent++
	if c.sent%16 == 0 {
		a.Flags |= verbs.FlagSignaled // selective signaling frees send-queue slots
	}
	c.answers = append(c.answers, a)
	return nil
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
	router  verbs.Router
	tag     verbs.Tag      // the client's wr_ids carry it
	recvs   []verbs.RecvWR // receive i, reposted as it completes
}

// NewHeaderOnly starts a client on qp (completions on cq) with recvs
// receives posted for answers.
func NewHeaderOnly(qp verbs.QP, cq verbs.CQ, recvs int, poll verbs.PollPolicy) (*HeaderOnly, error) {
	h := &HeaderOnly{qp: qp, cq: cq, poll: poll, done: make(chan struct{}), recvs: make([]verbs.RecvWR, recvs)}
	var err error
	if h.tag, err = h.router.Register(h.complete); err != nil {
		return nil, fmt.Errorf("seq: %w", err)
	}
	for i := range h.recvs {
		h.recvs[i] = verbs.RecvWR{ID: h.tag.ID(uint64(i))}
	}
	if err := qp.PostRecv(h.recvs); err != nil {
		return nil, err
	}
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
		w := []verbs.SendWR{{ID: h.tag.ID(0), Opcode: verbs.OpSendWithImm, Imm: guess}}
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

// Router is the router of the completions of the client's CQ, which its
// poller dispatches: register on it to post requests of your own on the
// client's QP.
func (h *HeaderOnly) Router() *verbs.Router { return &h.router }

// run polls the client's CQ and routes the completions; the client's own
// go to complete.
func (h *HeaderOnly) run(ctx context.Context) {
	defer close(h.done)
	wc := make([]verbs.WC, 64)
	for {
		n, err := verbs.PollWait(ctx, h.cq, wc, h.poll)
		if err == nil {
			_, err = h.router.Dispatch(wc[:n])
		}
		if err != nil {
			return
		}
	}
}

// complete hands an answer (or a request's error) to the oldest waiter,
// reposting the receive (the router handler, on the poller goroutine).
func (h *HeaderOnly) complete(w *verbs.WC) error {
	if w.Opcode != verbs.WCRecv {
		if w.Status == verbs.StatusSuccess {
			return nil // a signaled request's completion
		}
	} else if j := int(w.ID & verbs.LowMask); j < len(h.recvs) {
		if err := h.qp.PostRecv(h.recvs[j : j+1]); err != nil {
			return err
		}
	}
	h.mu.Lock()
	if len(h.waiters) > 0 {
		c := h.waiters[0]
		h.waiters = h.waiters[1:]
		c <- *w
	}
	h.mu.Unlock()
	return nil
}
