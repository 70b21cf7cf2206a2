package peers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/kv"
)

// lineConn is one TCP connection with buffered reads and writes, used by
// one caller at a time (a mutex serializes concurrent callers).
type lineConn struct {
	mu sync.Mutex
	c  net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
}

func dialLine(ctx context.Context, addr string) (*lineConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &lineConn{c: c, r: bufio.NewReaderSize(c, 128<<10), w: bufio.NewWriterSize(c, 128<<10)}, nil
}

func (l *lineConn) deadline(ctx context.Context) {
	if d, ok := ctx.Deadline(); ok {
		l.c.SetDeadline(d)
	} else {
		l.c.SetDeadline(time.Time{})
	}
}

func (l *lineConn) line() ([]byte, error) {
	b, err := l.r.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	return bytes.TrimRight(b, "\r\n"), nil
}

// RedisKV is a kv.Store on a Redis server: GET, SET and DEL over one
// connection (RESP), no pipelining.
type RedisKV struct{ l *lineConn }

var _ kv.Store = (*RedisKV)(nil)

// DialRedisKV connects to the Redis server at addr.
func DialRedisKV(ctx context.Context, addr string) (*RedisKV, error) {
	l, err := dialLine(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &RedisKV{l: l}, nil
}

func (r *RedisKV) cmd(args ...[]byte) {
	fmt.Fprintf(r.l.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(r.l.w, "$%d\r\n", len(a))
		r.l.w.Write(a)
		r.l.w.WriteString("\r\n")
	}
}

// Get implements kv.Store.
func (r *RedisKV) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.deadline(ctx)
	r.cmd([]byte("GET"), key)
	if err := r.l.w.Flush(); err != nil {
		return dst, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	h, err := r.l.line()
	if err != nil {
		return dst, err
	}
	if len(h) == 0 || h[0] != '$' {
		return dst, fmt.Errorf("redis answered %q", h)
	}
	n, err := strconv.Atoi(string(h[1:]))
	if err != nil {
		return dst, fmt.Errorf("redis answered %q", h)
	}
	if n < 0 {
		return dst, kv.ErrNotFound
	}
	start := len(dst)
	dst = append(dst, make([]byte, n+2)...)
	if _, err := ioReadFull(r.l.r, dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst[:start+n], nil
}

// Put implements kv.Store.
func (r *RedisKV) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	return r.simple(ctx, []byte("SET"), key, value)
}

// Delete implements kv.Store.
func (r *RedisKV) Delete(ctx context.Context, key []byte) error {
	return r.simple(ctx, []byte("DEL"), key)
}

func (r *RedisKV) simple(ctx context.Context, args ...[]byte) error {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.deadline(ctx)
	r.cmd(args...)
	if err := r.l.w.Flush(); err != nil {
		return fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	h, err := r.l.line()
	if err != nil {
		return err
	}
	if len(h) == 0 || (h[0] != '+' && h[0] != ':') {
		return fmt.Errorf("redis answered %q", h)
	}
	return nil
}

// Close implements kv.Store.
func (r *RedisKV) Close() error { return r.l.c.Close() }

// MemcachedKV is a kv.Store on a memcached server: get, set and delete
// over one connection (text protocol), no pipelining.
type MemcachedKV struct{ l *lineConn }

var _ kv.Store = (*MemcachedKV)(nil)

// DialMemcachedKV connects to the memcached server at addr.
func DialMemcachedKV(ctx context.Context, addr string) (*MemcachedKV, error) {
	l, err := dialLine(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &MemcachedKV{l: l}, nil
}

// Get implements kv.Store.
func (m *MemcachedKV) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	m.l.deadline(ctx)
	m.l.w.WriteString("get ")
	m.l.w.Write(key)
	m.l.w.WriteString("\r\n")
	if err := m.l.w.Flush(); err != nil {
		return dst, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	h, err := m.l.line()
	if err != nil {
		return dst, err
	}
	if string(h) == "END" {
		return dst, kv.ErrNotFound
	}
	f := bytes.Fields(h)
	if len(f) < 4 || string(f[0]) != "VALUE" {
		return dst, fmt.Errorf("memcached answered %q", h)
	}
	n, err := strconv.Atoi(string(f[3]))
	if err != nil {
		return dst, fmt.Errorf("memcached answered %q", h)
	}
	start := len(dst)
	dst = append(dst, make([]byte, n+2)...)
	if _, err := ioReadFull(m.l.r, dst[start:]); err != nil {
		return dst[:start], err
	}
	if end, err := m.l.line(); err != nil || string(end) != "END" {
		return dst[:start], fmt.Errorf("memcached: no END after the value (%q, %v)", end, err)
	}
	return dst[:start+n], nil
}

// Put implements kv.Store.
func (m *MemcachedKV) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	m.l.deadline(ctx)
	fmt.Fprintf(m.l.w, "set %s 0 0 %d\r\n", key, len(value))
	m.l.w.Write(value)
	m.l.w.WriteString("\r\n")
	return m.expect("STORED")
}

// Delete implements kv.Store.
func (m *MemcachedKV) Delete(ctx context.Context, key []byte) error {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	m.l.deadline(ctx)
	fmt.Fprintf(m.l.w, "delete %s\r\n", key)
	err := m.expect("DELETED")
	if err != nil && bytes.Contains([]byte(err.Error()), []byte("NOT_FOUND")) {
		return nil
	}
	return err
}

func (m *MemcachedKV) expect(want string) error {
	if err := m.l.w.Flush(); err != nil {
		return fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
	}
	h, err := m.l.line()
	if err != nil {
		return err
	}
	if string(h) != want {
		return fmt.Errorf("memcached answered %q", h)
	}
	return nil
}

// Close implements kv.Store.
func (m *MemcachedKV) Close() error { return m.l.c.Close() }

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, fmt.Errorf("%w: %w", kv.ErrUnreachable, err)
		}
	}
	return n, nil
}
