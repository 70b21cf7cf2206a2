package sockexp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// connGroup is the connections of one sock-isolation point to a Mux
// server: they share a deadline, fail at once when the point's context
// ends (expire) and are closed together.
type connGroup struct {
	deadline time.Time
	mu       sync.Mutex
	conns    []net.Conn
	expired  bool
}

// dial connects to uri and picks the connection's app with sel.
func (g *connGroup) dial(ctx context.Context, n network, uri string, sel byte) (net.Conn, error) {
	c, err := n.dial(ctx, uri)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.conns = append(g.conns, c)
	dl := g.deadline
	if g.expired {
		dl = time.Unix(1, 0)
	}
	g.mu.Unlock()
	if err := c.SetDeadline(dl); err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{sel}); err != nil {
		return nil, fmt.Errorf("sockexp: mux selector: %w", err)
	}
	return c, nil
}

// idle opens k echo connections and makes one round trip of out (read
// into in) on each; they stay open, idle, until the group closes.
func (g *connGroup) idle(ctx context.Context, n network, uri string, k int, out, in []byte) error {
	for range k {
		c, err := g.dial(ctx, n, uri, MuxEcho)
		if err != nil {
			return err
		}
		if _, err := c.Write(out); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, in); err != nil {
			return err
		}
		if !bytes.Equal(in, out) {
			return errEcho
		}
	}
	return nil
}

// expire fails every blocked call on the group's connections.
func (g *connGroup) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expired = true
	for _, c := range g.conns {
		c.SetDeadline(time.Unix(1, 0))
	}
}

// close closes the group's connections.
func (g *connGroup) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

// bulkFlow writes sink batches of one Write each on a connection to a
// sink, continuously, from its own goroutine, until finish.
type bulkFlow struct {
	c    net.Conn
	a    *acks
	stop atomic.Bool
	done chan struct{} // closed when the writer has returned
	once sync.Once
	err  error // set before done closes
}

// startBulk starts writing batches of size bytes on c.
func startBulk(c net.Conn, size int) *bulkFlow {
	b := &bulkFlow{c: c, a: &acks{c: c, t0: time.Now(), done: make(chan struct{})}, done: make(chan struct{})}
	b.a.want.Store(-1)
	go b.a.read()
	buf := make([]byte, size)
	binary.BigEndian.PutUint64(buf, uint64(size))
	go b.write(buf)
	return b
}

// write writes buf until stopped, then waits for the acks of every batch
// written.
func (b *bulkFlow) write(buf []byte) {
	defer close(b.done)
	var batches int64
	for !b.stop.Load() {
		if _, err := b.c.Write(buf); err != nil {
			b.a.expect(0)
			b.err = fmt.Errorf("sockexp: bulk write: %w", err)
			return
		}
		batches++
	}
	b.a.expect(batches)
	<-b.a.done
	if b.a.err != nil {
		b.err = fmt.Errorf("sockexp: bulk ack: %w", b.a.err)
	}
}

// acked is the batches the sink has acknowledged so far; 0 for a nil
// flow.
func (b *bulkFlow) acked() int64 {
	if b == nil {
		return 0
	}
	return b.a.got.Load()
}

// finish stops the writer and waits until the sink has acknowledged
// every batch written (or the connection failed); it returns the flow's
// error. Only the first call waits.
func (b *bulkFlow) finish() error {
	b.once.Do(func() {
		b.stop.Store(true)
		<-b.done
	})
	return b.err
}
