package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/kv"
)

// BatchKV is a kv.Store whose concurrent GETs share round trips, as the
// concurrent requests of rdmakit's tasks share a frame on their
// connection: GETs that arrive while a round trip is on the wire wait,
// and the next round trip carries up to Max of them as one memcached
// multi-get (`get k1 k2 … kN`) or one Redis MGET. One round trip is on
// the wire at a time. PUTs and DELETEs go unbatched over a connection of
// their own.
type BatchKV struct {
	max    int
	l      *lineConn // the batched GETs, used by loop alone
	direct kv.Store  // PUT and DELETE
	redis  bool

	mu      sync.Mutex
	pending []*batchGet
	err     error // the connection's failure: every later GET gets it
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once

	trips, keys atomic.Uint64
}

var _ kv.Store = (*BatchKV)(nil)

// batchGet is one GET waiting for its batch's round trip.
type batchGet struct {
	key  []byte
	val  []byte
	err  error
	done chan struct{}
}

// Errors of BatchKV's GETs.
var (
	// ErrBatchClosed: the client was closed.
	ErrBatchClosed = errors.New("peers: batching client closed")
	// ErrKeySpace: a key with a space or line break, which the text
	// protocols cannot carry in a list of keys.
	ErrKeySpace = errors.New("peers: key holds a space or line break")
)

// DialMemcachedBatch connects to the memcached server at addr with a
// client that sends up to max concurrent GETs as one multi-get.
func DialMemcachedBatch(ctx context.Context, addr string, max int) (*BatchKV, error) {
	return dialBatch(ctx, addr, max, false)
}

// DialRedisBatch connects to the Redis server at addr with a client that
// sends up to max concurrent GETs as one MGET.
func DialRedisBatch(ctx context.Context, addr string, max int) (*BatchKV, error) {
	return dialBatch(ctx, addr, max, true)
}

func dialBatch(ctx context.Context, addr string, max int, redis bool) (*BatchKV, error) {
	if max < 1 {
		return nil, fmt.Errorf("peers: a batch of %d keys", max)
	}
	l, err := dialLine(ctx, addr)
	if err != nil {
		return nil, err
	}
	var direct kv.Store
	if redis {
		direct, err = DialRedisKV(ctx, addr)
	} else {
		direct, err = DialMemcachedKV(ctx, addr)
	}
	if err != nil {
		l.c.Close()
		return nil, err
	}
	b := &BatchKV{max: max, l: l, direct: direct, redis: redis,
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go b.loop()
	return b, nil
}

// RoundTrips is the batched round trips made so far.
func (b *BatchKV) RoundTrips() uint64 { return b.trips.Load() }

// Keys is the GETs the batched round trips carried so far.
func (b *BatchKV) Keys() uint64 { return b.keys.Load() }

// Get implements kv.Store.
func (b *BatchKV) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := kv.Check(key, nil); err != nil {
		return dst, err
	}
	if bytes.ContainsAny(key, " \r\n") {
		return dst, ErrKeySpace // it would end the key list
	}
	g := &batchGet{key: key, done: make(chan struct{})}
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return dst, err
	}
	b.pending = append(b.pending, g)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		return dst, fmt.Errorf("peers: GET: %w", ctx.Err()) // loop still answers g, to nobody
	}
	if g.err != nil {
		return dst, g.err
	}
	return append(dst, g.val...), nil
}

// loop makes the round trips: it takes up to max waiting GETs, sends
// them as one request and answers each from the reply.
func (b *BatchKV) loop() {
	defer close(b.stopped)
	batch := make([]*batchGet, 0, b.max)
	shared := false // the last round trip carried several GETs
	for {
		if shared {
			// The tasks the last answers woke are about to ask again: let
			// them queue first (one yield), as rdmakit's tcp link lets
			// concurrent posters share a write.
			runtime.Gosched()
		}
		b.mu.Lock()
		n := min(len(b.pending), b.max)
		batch = append(batch[:0], b.pending[:n]...)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.mu.Unlock()
		if n == 0 {
			select {
			case <-b.wake:
				continue
			case <-b.done:
				return
			}
		}
		shared = n > 1
		err := b.roundTrip(batch)
		b.trips.Add(1)
		b.keys.Add(uint64(n))
		for _, g := range batch {
			if err != nil {
				g.err = err
			}
			close(g.done)
		}
		if err != nil {
			b.fail(err)
			return
		}
	}
}

// fail answers every waiting GET, and every later one, with err.
func (b *BatchKV) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	for _, g := range b.pending {
		g.err = b.err
		close(g.done)
	}
	b.pending = nil
	b.mu.Unlock()
}

// roundTrip sends the batch's keys as one request and reads each key's
// answer into its batchGet (val, or err kv.ErrNotFound).
func (b *BatchKV) roundTrip(batch []*batchGet) error {
	w := b.l.w
	if b.redis {
		w.WriteString("*")
		w.WriteString(strconv.Itoa(len(batch) + 1))
		w.WriteString("\r\n$4\r\nMGET\r\n")
		for _, g := range batch {
			w.WriteString("$")
			w.WriteString(strconv.Itoa(len(g.key)))
			w.WriteString("\r\n")
			w.Write(g.key)
			w.WriteString("\r\n")
		}
	} else {
		w.WriteString("get")
		for _, g := range batch {
			w.WriteString(" ")
			w.Write(g.key)
		}
		w.WriteString("\r\n")
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	if b.redis {
		return b.readMGET(batch)
	}
	return b.readMultiGet(batch)
}

// readMGET reads Redis's array of bulk strings, nil for a missing key.
func (b *BatchKV) readMGET(batch []*batchGet) error {
	h, err := b.l.line()
	if err != nil {
		return err
	}
	if len(h) == 0 || h[0] != '*' {
		return fmt.Errorf("redis answered %q", h)
	}
	if n, err := strconv.Atoi(string(h[1:])); err != nil || n != len(batch) {
		return fmt.Errorf("redis answered %q to an MGET of %d keys", h, len(batch))
	}
	for _, g := range batch {
		h, err := b.l.line()
		if err != nil {
			return err
		}
		if len(h) == 0 || h[0] != '$' {
			return fmt.Errorf("redis answered %q", h)
		}
		n, err := strconv.Atoi(string(h[1:]))
		if err != nil {
			return fmt.Errorf("redis answered %q", h)
		}
		if n < 0 {
			g.err = kv.ErrNotFound
			continue
		}
		if err := b.readValue(g, n); err != nil {
			return err
		}
	}
	return nil
}

// readMultiGet reads memcached's VALUE blocks, in the keys' order with
// the missing keys left out, up to END.
func (b *BatchKV) readMultiGet(batch []*batchGet) error {
	i := 0
	for {
		h, err := b.l.line()
		if err != nil {
			return err
		}
		if string(h) == "END" {
			break
		}
		f := bytes.Fields(h)
		if len(f) < 4 || string(f[0]) != "VALUE" {
			return fmt.Errorf("memcached answered %q", h)
		}
		n, err := strconv.Atoi(string(f[3]))
		if err != nil || n < 0 {
			return fmt.Errorf("memcached answered %q", h)
		}
		for i < len(batch) && !bytes.Equal(batch[i].key, f[1]) {
			batch[i].err = kv.ErrNotFound // left out: missing
			i++
		}
		if i == len(batch) {
			return fmt.Errorf("memcached answered key %q, not asked for", f[1])
		}
		if err := b.readValue(batch[i], n); err != nil {
			return err
		}
		i++
	}
	for ; i < len(batch); i++ {
		batch[i].err = kv.ErrNotFound
	}
	return nil
}

// readValue reads n bytes and the CRLF after them into g.val.
func (b *BatchKV) readValue(g *batchGet, n int) error {
	g.val = make([]byte, n+2)
	if _, err := ioReadFull(b.l.r, g.val); err != nil {
		return err
	}
	g.val = g.val[:n]
	return nil
}

// Put implements kv.Store, unbatched.
func (b *BatchKV) Put(ctx context.Context, key, value []byte) error {
	return b.direct.Put(ctx, key, value)
}

// Delete implements kv.Store, unbatched.
func (b *BatchKV) Delete(ctx context.Context, key []byte) error {
	return b.direct.Delete(ctx, key)
}

// Close implements kv.Store: it closes the connections; waiting GETs
// fail with ErrBatchClosed.
func (b *BatchKV) Close() error {
	b.once.Do(func() {
		close(b.done)
		b.l.c.Close()
		<-b.stopped
		b.fail(ErrBatchClosed)
		b.direct.Close()
	})
	return nil
}
