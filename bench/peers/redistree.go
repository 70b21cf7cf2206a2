package peers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/btree"
)

// RedisTree is a btree.Tree on one Redis sorted set: the ordered-index
// peer of btree/sherman. Every member has score 0 and is the escaped key,
// a NUL byte and the value, so that Redis's lexicographic order of
// members is the order of keys. Keys may hold any byte: the escape
// (0x00 → 0x01 0x01, 0x01 → 0x01 0x02, other bytes as they are) keeps
// their order and leaves NUL only as the separator, so a member's key
// is a prefix of no other key's member (E is the escaped key):
//
//	Get     ZRANGEBYLEX set [E\x00 (E\x01 LIMIT 0 1
//	Put     MULTI · ZREMRANGEBYLEX set [E\x00 (E\x01 · ZADD set 0 E\x00value · EXEC
//	Delete  ZREMRANGEBYLEX set [E\x00 (E\x01
//	Scan    ZRANGEBYLEX set [E(from) (E(to) LIMIT 0 n, a page at a time
//
// An update must take out the old member (its value is part of it): the
// MULTI/EXEC makes the removal and the add one atomic step, and the four
// commands go out in one write, so a Put is one round trip. A RedisTree
// holds Conns connections; each operation takes one for its duration.
type RedisTree struct {
	set   []byte
	pool  chan *redisConn
	conns []*redisConn
	trips atomic.Uint64
	bytes atomic.Uint64
	close atomic.Bool
}

var _ btree.Tree = (*RedisTree)(nil)

// redisScanPage is the members a Scan asks for at a time.
const redisScanPage = 256

// redisConn is one connection and its buffered reader and writer.
type redisConn struct {
	l *lineConn
	n *countConn
}

// countConn counts the bytes read from a connection.
type countConn struct {
	net.Conn
	n uint64
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n += uint64(n)
	return n, err
}

// DialRedisTree connects conns connections to the Redis server at addr,
// for a tree in the sorted set named set.
func DialRedisTree(ctx context.Context, addr, set string, conns int) (*RedisTree, error) {
	if conns <= 0 {
		conns = 1
	}
	t := &RedisTree{set: []byte(set), pool: make(chan *redisConn, conns)}
	for range conns {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%w: redis %s: %w", btree.ErrUnreachable, addr, err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		cc := &countConn{Conn: c}
		rc := &redisConn{n: cc, l: &lineConn{c: cc, r: bufio.NewReaderSize(cc, 64<<10), w: bufio.NewWriterSize(cc, 16<<10)}}
		t.conns = append(t.conns, rc)
		t.pool <- rc
	}
	return t, nil
}

// RedisTreeStats counts a RedisTree's traffic.
type RedisTreeStats struct {
	RoundTrips uint64 // writes answered (a Put's MULTI is one)
	BytesRead  uint64 // bytes read from Redis
}

// Stats returns the tree's counters (BytesRead as of the last returned
// connection).
func (t *RedisTree) Stats() RedisTreeStats {
	return RedisTreeStats{RoundTrips: t.trips.Load(), BytesRead: t.bytes.Load()}
}

// take waits for a free connection.
func (t *RedisTree) take(ctx context.Context) (*redisConn, error) {
	if t.close.Load() {
		return nil, btree.ErrClosed
	}
	select {
	case c := <-t.pool:
		c.l.deadline(ctx)
		c.n.n = 0
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// give returns a connection, counting what was read on it.
func (t *RedisTree) give(c *redisConn) {
	t.bytes.Add(c.n.n)
	t.pool <- c
}

// cmd appends one RESP command.
func (c *redisConn) cmd(args ...[]byte) {
	fmt.Fprintf(c.l.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.l.w, "$%d\r\n", len(a))
		c.l.w.Write(a)
		c.l.w.WriteString("\r\n")
	}
}

// flush sends the commands written, one round trip.
func (t *RedisTree) flush(c *redisConn) error {
	t.trips.Add(1)
	if err := c.l.w.Flush(); err != nil {
		return fmt.Errorf("%w: redis: %w", btree.ErrUnreachable, err)
	}
	return nil
}

// errRedis is an answer this client does not expect.
var errRedis = errors.New("redis: unexpected answer")

// status reads a simple, integer or error answer.
func (c *redisConn) status() error {
	h, err := c.l.line()
	if err != nil {
		return err
	}
	if len(h) == 0 || (h[0] != '+' && h[0] != ':') {
		return fmt.Errorf("%w: %q", errRedis, h)
	}
	return nil
}

// array reads an array of bulk strings, each appended to out.
func (c *redisConn) array(out [][]byte) ([][]byte, error) {
	h, err := c.l.line()
	if err != nil {
		return out, err
	}
	if len(h) == 0 || h[0] != '*' {
		return out, fmt.Errorf("%w: %q", errRedis, h)
	}
	n, err := strconv.Atoi(string(h[1:]))
	if err != nil {
		return out, fmt.Errorf("%w: %q", errRedis, h)
	}
	for range n {
		b, err := c.l.line()
		if err != nil {
			return out, err
		}
		if len(b) == 0 || b[0] != '$' {
			return out, fmt.Errorf("%w: %q", errRedis, b)
		}
		m, err := strconv.Atoi(string(b[1:]))
		if err != nil || m < 0 {
			return out, fmt.Errorf("%w: %q", errRedis, b)
		}
		v := make([]byte, m+2)
		if _, err := ioReadFull(c.l.r, v); err != nil {
			return out, fmt.Errorf("%w: %w", btree.ErrUnreachable, err)
		}
		out = append(out, v[:m])
	}
	return out, nil
}

// escape appends key with its 0x00 and 0x01 bytes escaped.
func escape(dst, key []byte) []byte {
	for _, c := range key {
		if c <= 1 {
			dst = append(dst, 1, c+1)
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// member splits a member into its key (unescaped) and value.
func member(m []byte) (key, value []byte, err error) {
	i := bytes.IndexByte(m, 0)
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: a member without a separator", errRedis)
	}
	key = make([]byte, 0, i)
	for j := 0; j < i; j++ {
		c := m[j]
		if c == 1 {
			if j++; j == i {
				return nil, nil, fmt.Errorf("%w: a member with a bad escape", errRedis)
			}
			c = m[j] - 1
		}
		key = append(key, c)
	}
	return key, m[i+1:], nil
}

// keyRange is the ZRANGEBYLEX bounds of key's member.
func keyRange(key []byte) (lo, hi []byte) {
	lo = append(escape([]byte{'['}, key), 0)
	hi = append(escape([]byte{'('}, key), 1)
	return lo, hi
}

// Get implements btree.Tree.
func (t *RedisTree) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := btree.Check(key, nil, btree.MaxKey, btree.MaxValue); err != nil {
		return dst, err
	}
	c, err := t.take(ctx)
	if err != nil {
		return dst, err
	}
	defer t.give(c)
	lo, hi := keyRange(key)
	c.cmd([]byte("ZRANGEBYLEX"), t.set, lo, hi, []byte("LIMIT"), []byte("0"), []byte("1"))
	if err := t.flush(c); err != nil {
		return dst, err
	}
	ms, err := c.array(nil)
	if err != nil {
		return dst, err
	}
	if len(ms) == 0 {
		return dst, btree.ErrNotFound
	}
	_, v, err := member(ms[0])
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

// Put implements btree.Tree: the old member's removal and the new one's
// add in one MULTI/EXEC.
func (t *RedisTree) Put(ctx context.Context, key, value []byte) error {
	if err := btree.Check(key, value, btree.MaxKey, btree.MaxValue); err != nil {
		return err
	}
	c, err := t.take(ctx)
	if err != nil {
		return err
	}
	defer t.give(c)
	lo, hi := keyRange(key)
	c.cmd([]byte("MULTI"))
	c.cmd([]byte("ZREMRANGEBYLEX"), t.set, lo, hi)
	c.cmd([]byte("ZADD"), t.set, []byte("0"), append(append(escape(nil, key), 0), value...))
	c.cmd([]byte("EXEC"))
	if err := t.flush(c); err != nil {
		return err
	}
	for range 3 { // +OK, +QUEUED, +QUEUED
		if err := c.status(); err != nil {
			return err
		}
	}
	h, err := c.l.line() // *2, :removed, :added
	if err != nil {
		return err
	}
	if string(h) != "*2" {
		return fmt.Errorf("%w: EXEC answered %q", errRedis, h)
	}
	if err := c.status(); err != nil {
		return err
	}
	return c.status()
}

// Delete implements btree.Tree.
func (t *RedisTree) Delete(ctx context.Context, key []byte) error {
	if err := btree.Check(key, nil, btree.MaxKey, btree.MaxValue); err != nil {
		return err
	}
	c, err := t.take(ctx)
	if err != nil {
		return err
	}
	defer t.give(c)
	lo, hi := keyRange(key)
	c.cmd([]byte("ZREMRANGEBYLEX"), t.set, lo, hi)
	if err := t.flush(c); err != nil {
		return err
	}
	return c.status()
}

// Close implements btree.Tree.
func (t *RedisTree) Close() error {
	if t.close.Swap(true) {
		return nil
	}
	var errs []error
	for _, c := range t.conns {
		errs = append(errs, c.l.c.Close())
	}
	return errors.Join(errs...)
}
