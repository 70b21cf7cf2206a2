package sockexp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// minBatch is the least a sink batch carries: a batch is one Write of
// the size measured, or as many as make minBatch, so that acks are few.
const minBatch = 1 << 20

// bulkResult is what one point of bulk writes moved.
type bulkResult struct {
	bytes   int64
	elapsed time.Duration // from the first write to the last ack
}

// gbps is the result in GB/s (10⁹ bytes per second).
func (b bulkResult) gbps() float64 { return float64(b.bytes) / b.elapsed.Seconds() / 1e9 }

// bulk dials conns connections to a sink at uri and writes size bytes
// per Write call on each, all at once, for about d; it returns the
// bytes the sink acknowledged and the time from the first write to the
// last ack. Every connection writes whole batches, so the last ack
// covers everything written.
func bulk(ctx context.Context, n network, uri string, conns, size int, d time.Duration) (bulkResult, error) {
	batch := max(size, minBatch/size*size)
	cs := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := n.dial(ctx, uri)
		if err != nil {
			return bulkResult{}, err
		}
		cs = append(cs, c)
	}
	stop := context.AfterFunc(ctx, func() {
		for _, c := range cs {
			c.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		sent  = make([]int64, conns)
		ends  = make([]time.Duration, conns)
		errs  = make([]error, conns)
		t0    time.Time
	)
	for i, c := range cs {
		if err := c.SetDeadline(time.Now().Add(d + roundTripGrace)); err != nil {
			return bulkResult{}, err
		}
		buf := make([]byte, size)
		binary.BigEndian.PutUint64(buf, uint64(batch))
		wg.Go(func() {
			<-start
			sent[i], ends[i], errs[i] = writeBatches(c, buf, batch/size, t0, d)
		})
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return bulkResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return bulkResult{}, err
	}
	var res bulkResult
	for i := range cs {
		res.bytes += sent[i] * int64(batch)
		res.elapsed = max(res.elapsed, ends[i])
	}
	return res, nil
}

// writeBatches writes batches of per Writes of buf on c until d has
// passed since t0, then waits for the sink's ack of each. It returns
// the batches written and when (since t0) the last ack arrived. The
// acks are read all along by another goroutine, so that they never
// fill the connection while it writes.
func writeBatches(c net.Conn, buf []byte, per int, t0 time.Time, d time.Duration) (int64, time.Duration, error) {
	a := &acks{c: c, t0: t0, done: make(chan struct{})}
	a.want.Store(-1)
	go a.read()
	var batches int64
	for time.Since(t0) < d || batches == 0 {
		for range per {
			if _, err := c.Write(buf); err != nil {
				a.expect(0)
				return 0, 0, fmt.Errorf("sockexp: bulk write: %w", err)
			}
		}
		batches++
	}
	a.expect(batches)
	<-a.done
	if a.err != nil {
		return 0, 0, fmt.Errorf("sockexp: bulk ack: %w", a.err)
	}
	return batches, time.Duration(a.last.Load()), nil
}

// acks counts a sink's one-byte acks on a connection.
type acks struct {
	c  net.Conn
	t0 time.Time
	// got is the acks read; want the acks expected (−1 while the writer
	// writes); last when (since t0) the latest of them arrived.
	got, want, last atomic.Int64
	once            sync.Once
	done            chan struct{}
	err             error // set before done closes
}

// read reads acks until it has the ones expected or the connection
// fails.
func (a *acks) read() {
	buf := make([]byte, 512)
	for {
		n, err := a.c.Read(buf)
		if n > 0 {
			a.last.Store(int64(time.Since(a.t0)))
			g := a.got.Add(int64(n))
			if w := a.want.Load(); w >= 0 && g >= w {
				a.finish(nil)
				return
			}
		}
		if err != nil {
			a.finish(err)
			return
		}
	}
}

// expect says how many acks the writer waits for; read ends once it has
// them (at once if it has them already).
func (a *acks) expect(n int64) {
	a.want.Store(n)
	if a.got.Load() >= n {
		a.finish(nil)
	}
}

// finish ends the wait, with err.
func (a *acks) finish(err error) {
	a.once.Do(func() {
		a.err = err
		close(a.done)
	})
}
