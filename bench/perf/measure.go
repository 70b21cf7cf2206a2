package perf

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/bench/stats"
	"github.com/rdmakit/rdmakit/verbs"
)

// warmup is the number of untimed operations before a latency test.
const warmup = 16

// ErrNoEcho is returned by a SEND latency test of a Dial pair whose server
// does not send SENDs back.
var ErrNoEcho = errors.New("perf: the server does not echo SENDs")

// clockEvery is how many operations the untimed latency loop of
// MeasureAvg runs between two readings of the clock when it stops by
// duration.
const clockEvery = 256

// Measure runs one cell. With a zero Stop it measures for a second.
func (p *Pair) Measure(ctx context.Context, c Cell, s Stop) (Measurement, error) {
	return p.measure(ctx, c, s, false)
}

// MeasureAvg runs the latency test of c — the same one-at-a-time loop as
// Measure, post then poll to completion (for SEND, to the echo) — without
// reading the clock around each operation, and reports the plain average:
// Elapsed / Iters, as ucx_perftest's average is. Lat holds
// only Count and Avg (half the round trip for SEND); the per-operation
// clock readings Measure's latency test makes, and their cost in its
// average, are left out. c.Test is ignored. When s stops by duration the
// loop reads the clock every 256 operations, so it may run a little over.
func (p *Pair) MeasureAvg(ctx context.Context, c Cell, s Stop) (Measurement, error) {
	c.Test = Lat
	return p.measure(ctx, c, s, true)
}

// measure runs one cell; untimed runs a latency test without per-operation
// clock readings (MeasureAvg).
func (p *Pair) measure(ctx context.Context, c Cell, s Stop, untimed bool) (Measurement, error) {
	m := Measurement{Cell: c}
	if err := p.check(c.Op, c.Size); err != nil {
		return m, err
	}
	if s.Iters <= 0 && s.Duration <= 0 {
		s.Duration = time.Second
	}
	run := func(ctx context.Context) (err error) {
		switch {
		case c.Test == Lat && untimed:
			if _, _, err = p.latency(ctx, c, Stop{Iters: warmup}, false); err != nil {
				return err
			}
			m.Iters, m.Elapsed, err = p.untimedLatency(ctx, c, s)
			if m.Iters > 0 {
				avg := m.Elapsed / time.Duration(m.Iters)
				if c.Op == Send {
					avg /= 2
				}
				m.Lat = stats.Summary{Count: m.Iters, Avg: avg}
			}
		case c.Test == Lat:
			if _, _, err = p.latency(ctx, c, Stop{Iters: warmup}, false); err != nil {
				return err
			}
			p.lat.Reset()
			m.Iters, m.Elapsed, err = p.latency(ctx, c, s, true)
			m.Lat = p.lat.Summary()
		case c.Test == BW:
			m.Iters, m.Elapsed, m.Peak, err = p.bandwidth(ctx, c, s)
		}
		return err
	}
	if c.Op == Send {
		if err := p.postRecvs(); err != nil {
			return m, err
		}
		if p.srv != nil {
			return m, p.srv.withServer(ctx, c.Test == Lat, c.Size, run)
		}
		if err := p.probeEcho(ctx); err != nil {
			return m, err
		}
		if c.Test == Lat && p.echo != echoYes {
			return m, fmt.Errorf("%w: no answer to a SEND within %v; SEND latency is half an echoed round trip", ErrNoEcho, EchoTimeout)
		}
	}
	return m, run(ctx)
}

// probeEcho finds out, once, whether a remote server echoes SENDs: it
// sends one byte and waits EchoTimeout for it to come back.
func (p *Pair) probeEcho(ctx context.Context) error {
	if p.echo != echoUnknown {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, EchoTimeout)
	defer cancel()
	c := Cell{Op: Send, Test: Lat, Size: 1}
	p.prepare(Send, 1, 1, 1)
	if err := p.cqp.PostSend(p.wrs[:1]); err != nil {
		return err
	}
	err := p.wait(pctx, c, 1, 1)
	switch {
	case err == nil:
		p.echo = echoYes
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		p.echo = echoNo
	default:
		return err
	}
	return nil
}

// sendCredit reports whether n more SENDs may be posted without
// outrunning the server's receives: in process, the receives the server
// has posted; against an echoing remote server, at most Window messages
// not yet echoed. Otherwise the client's RNR retries are the only
// back-pressure.
func (p *Pair) sendCredit(n int) bool {
	switch {
	case p.srv != nil:
		return p.sent+uint64(n) <= p.srv.credits.Load()
	case p.echo == echoYes:
		return p.sent+uint64(n)-p.recvd <= uint64(p.cfg.Window)
	}
	return true
}

// awaitingEcho reports whether an echoing remote server still owes the
// client messages.
func (p *Pair) awaitingEcho() bool {
	return p.srv == nil && p.echo == echoYes && p.recvd < p.sent
}

// latency posts one operation at a time and waits for its completion
// (for SEND, for the echoed message too), recording each latency when
// record is set.
func (p *Pair) latency(ctx context.Context, c Cell, s Stop, record bool) (int, time.Duration, error) {
	p.prepare(c.Op, c.Size, 1, 1)
	wrs := p.wrs[:1]
	recvs := 0
	if c.Op == Send {
		recvs = 1
	}
	start := time.Now()
	deadline := start.Add(s.Duration)
	for n := 1; ; n++ {
		t0 := time.Now()
		if err := p.cqp.PostSend(wrs); err != nil {
			return n - 1, 0, err
		}
		if err := p.wait(ctx, c, 1, recvs); err != nil {
			return n - 1, 0, err
		}
		t1 := time.Now()
		if record {
			d := t1.Sub(t0)
			if c.Op == Send {
				d /= 2
			}
			p.lat.Record(d)
		}
		if (s.Iters > 0 && n >= s.Iters) || (s.Iters <= 0 && !t1.Before(deadline)) {
			return n, t1.Sub(start), nil
		}
	}
}

// untimedLatency is latency without the clock around each operation: it
// reads the clock at the start and the end and, when s stops by duration,
// every clockEvery operations.
func (p *Pair) untimedLatency(ctx context.Context, c Cell, s Stop) (int, time.Duration, error) {
	p.prepare(c.Op, c.Size, 1, 1)
	wrs := p.wrs[:1]
	recvs := 0
	if c.Op == Send {
		recvs = 1
	}
	start := time.Now()
	deadline := start.Add(s.Duration)
	for n := 1; ; n++ {
		if err := p.cqp.PostSend(wrs); err != nil {
			return n - 1, 0, err
		}
		if err := p.wait(ctx, c, 1, recvs); err != nil {
			return n - 1, 0, err
		}
		if s.Iters > 0 {
			if n >= s.Iters {
				return n, time.Since(start), nil
			}
		} else if n%clockEvery == 0 {
			if now := time.Now(); !now.Before(deadline) {
				return n, now.Sub(start), nil
			}
		}
	}
}

// wait polls the client CQ until it has seen sends completions of its
// own requests and recvs received messages, re-posting each consumed
// receive.
func (p *Pair) wait(ctx context.Context, c Cell, sends, recvs int) error {
	if c.Op == Send {
		p.sent += uint64(sends)
	}
	for sends > 0 || recvs > 0 {
		n, err := verbs.PollWait(ctx, p.ccq, p.wc, p.cfg.Poll)
		if err != nil {
			return err
		}
		for i := range n {
			wc := &p.wc[i]
			if wc.Status != verbs.StatusSuccess {
				return completionError(c.Op, c.Size, wc)
			}
			if wc.Opcode == verbs.WCRecv {
				recvs--
				p.recvd++
				if err := p.cqp.PostRecv(p.crecv); err != nil {
					return err
				}
			} else {
				sends--
			}
		}
	}
	return nil
}

// bandwidth keeps up to Window operations outstanding, posted in lists of
// Batch with the last one signaled, and returns the operations completed,
// the elapsed time and the peak rate.
func (p *Pair) bandwidth(ctx context.Context, c Cell, s Stop) (done int, elapsed time.Duration, peak float64, err error) {
	b := p.cfg.Batch
	w := p.cfg.Window
	p.prepare(c.Op, c.Size, b, b)
	list := p.wrs[:b]
	posted := 0
	start := time.Now()
	deadline := start.Add(s.Duration)
	slice := max(s.Duration/20, time.Millisecond)
	sliceStart, sliceDone := start, 0
	now, stopping := start, false
	for {
		for !stopping && posted-done+b <= w && (s.Iters <= 0 || posted < s.Iters) {
			// The last list of an iteration-bounded run may be shorter: its
			// tail, whose last request is signaled.
			n := b
			if s.Iters > 0 {
				n = min(b, s.Iters-posted)
			}
			if c.Op == Send && !p.sendCredit(n) {
				break // the server has not re-posted enough receives yet
			}
			if err = p.cqp.PostSend(list[b-n:]); err != nil {
				return done, 0, 0, err
			}
			posted += n
			if c.Op == Send {
				p.sent += uint64(n)
			}
		}
		if posted == done && (c.Op != Send || !p.awaitingEcho()) {
			if stopping || (s.Iters > 0 && posted >= s.Iters) {
				break
			}
			if err = ctx.Err(); err != nil {
				return done, 0, 0, err
			}
			runtime.Gosched() // waiting for SEND credits
		} else {
			n, err := verbs.PollWait(ctx, p.ccq, p.wc, p.cfg.Poll)
			if err != nil {
				return done, 0, 0, err
			}
			for i := range n {
				wc := &p.wc[i]
				if wc.Status != verbs.StatusSuccess {
					return done, 0, 0, completionError(c.Op, c.Size, wc)
				}
				if wc.Opcode == verbs.WCRecv {
					// An echo from a remote server.
					p.recvd++
					if err = p.cqp.PostRecv(p.crecv); err != nil {
						return done, 0, 0, err
					}
				} else {
					// Completions arrive in order; only the last list
					// can be short.
					done = min(done+b, posted)
				}
			}
		}
		now = time.Now()
		if s.Iters <= 0 && !now.Before(deadline) {
			stopping = true
		}
		if d := now.Sub(sliceStart); d >= slice {
			peak = max(peak, float64(done-sliceDone)/d.Seconds())
			sliceStart, sliceDone = now, done
		}
	}
	elapsed = now.Sub(start)
	if avg := float64(done) / elapsed.Seconds(); peak < avg {
		peak = avg
	}
	return done, elapsed, peak, nil
}
