package pilaf

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/verbs"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Poll is how the client's completion poller waits (default
	// adaptive).
	Poll verbs.PollPolicy
	// Slots is the number of operations in flight at once (default 16).
	// The QP needs room for about 3×Slots send requests and 2×Slots
	// receives.
	Slots int
}

// Client is a Pilaf store client: GET by two READs (the entries, then the
// extent), verified by CRC64 and retried on a mismatch; PUT and DELETE by
// RPC to the node. It implements kv.Store.
type Client struct {
	rpc     *rpc.Client
	ops     *remote.Ops
	base    uint64
	rkey    uint32
	buckets int
	retries atomic.Uint64
	once    sync.Once
	closed  atomic.Bool
	rpcs    atomic.Uint64
	life    sync.RWMutex // operations hold it shared while they use the buffers; Close exclusively
	trust   bool         // tests: skip the CRC checks, to show what they catch
}

var _ kv.Store = (*Client)(nil)

// slotSize is a GET's buffer: a window of entries and the largest extent.
const slotSize = window*entrySize + extentHead + kv.MaxKey + kv.MaxValue

// NewClient starts a client on qp, connected to a node's Serve, with
// completions on cq; pd registers its buffers.
func NewClient(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ, cfg ClientConfig) (*Client, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	c := &Client{}
	rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: maxMessage, Slots: cfg.Slots, Poll: cfg.Poll})
	if err != nil {
		return nil, fmt.Errorf("pilaf: %w", err)
	}
	ops, err := remote.New(pd, qp, cfg.Slots, slotSize, rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("pilaf: %w", err)
	}
	c.rpc, c.ops = rc, ops
	var info [16]byte
	if _, err := rc.Call(ctx, methodInfo, nil, info[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("pilaf: node info: %w", c.mapErr(err))
	}
	c.base, c.rkey, c.buckets = binary.LittleEndian.Uint64(info[:]), binary.LittleEndian.Uint32(info[8:]), int(binary.LittleEndian.Uint32(info[12:]))
	if c.buckets <= 0 {
		c.Close()
		return nil, fmt.Errorf("pilaf: node info: %d buckets: %w", c.buckets, kv.ErrUnreachable)
	}
	return c, nil
}

// Retries is how many times GETs found a torn entry or extent (a CRC
// mismatch) and read again.
func (c *Client) Retries() uint64 { return c.retries.Load() }

// maxRetries bounds a GET's re-reads of torn data before it gives up.
const maxRetries = 1 << 16

// Get implements kv.Store: READ a window of entries from the key's
// bucket, then the extent of an entry whose fingerprint matches.
func (c *Client) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := kv.Check(key, nil); err != nil {
		return dst, err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return dst, kv.ErrClosed
	}
	s, err := c.ops.Acquire(ctx)
	if err != nil {
		return dst, c.mapErr(err)
	}
	h := kv.Hash(key)
	fp := fingerprint(h)
	var wr [1]verbs.SendWR
	var sgl [1]verbs.SGE
	read := func(addr uint64, off, n int) error {
		sgl[0] = s.SGE(off, n)
		wr[0] = verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: sgl[:], RemoteAddr: addr, RKey: c.rkey}
		wc, err := c.ops.Do(ctx, s, wr[:])
		if err != nil {
			return err
		}
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("%w: READ: %w", kv.ErrUnreachable, wc.Status.Err())
		}
		return nil
	}
	retries := 0
	b, seen := int(h%uint64(c.buckets)), 0
	for seen < c.buckets {
		w := min(window, c.buckets-b, c.buckets-seen)
		start := seen
		if err := read(c.base+uint64(b*entrySize), 0, w*entrySize); err != nil {
			return dst, c.mapErr(err) // ctx ended or connection gone: the slot is not ours any more
		}
		torn := false
		for i := 0; i < w; i++ {
			e, empty, ok := readEntry(s.Buf[i*entrySize : (i+1)*entrySize])
			if !ok && c.trust {
				e, ok = rawEntry(s.Buf[i*entrySize:(i+1)*entrySize]), true
			}
			if !ok {
				torn = true
				break
			}
			if empty {
				c.ops.Release(s)
				return dst, kv.ErrNotFound
			}
			if e.tombstone() || !e.valid() || e.fp() != fp || e.length < extentHead || int(e.length) > slotSize-window*entrySize {
				seen++
				continue
			}
			off := window * entrySize
			if err := read(e.addr, off, int(e.length)); err != nil {
				return dst, c.mapErr(err)
			}
			ext := s.Buf[off : off+int(e.length)]
			if !c.trust && crc(ext) != e.extCRC {
				torn = true // reused or half-written since we read the entry
				break
			}
			k, v, ok := readExtent(ext)
			if ok && bytes.Equal(k, key) {
				dst = append(dst, v...)
				c.ops.Release(s)
				return dst, nil
			}
			seen++
		}
		if torn {
			c.retries.Add(1)
			if retries++; retries > maxRetries {
				c.ops.Release(s)
				return dst, fmt.Errorf("%w: %d torn reads in a row", kv.ErrUnreachable, retries)
			}
			seen = start
			continue // read the same window again
		}
		b = (b + w) % c.buckets
	}
	c.ops.Release(s)
	return dst, kv.ErrNotFound
}

// Put implements kv.Store by RPC.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	if c.closed.Load() {
		return kv.ErrClosed
	}
	req := make([]byte, 2+len(key)+len(value))
	binary.LittleEndian.PutUint16(req, uint16(len(key)))
	copy(req[2:], key)
	copy(req[2+len(key):], value)
	c.rpcs.Add(1)
	_, err := c.rpc.Call(ctx, methodPut, req, nil)
	return c.mapErr(err)
}

// Delete implements kv.Store by RPC.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := kv.Check(key, nil); err != nil {
		return err
	}
	if c.closed.Load() {
		return kv.ErrClosed
	}
	c.rpcs.Add(1)
	_, err := c.rpc.Call(ctx, methodDelete, key, nil)
	return c.mapErr(err)
}

// mapErr turns RPC and connection errors into kv's.
func (c *Client) mapErr(err error) error { return remote.MapErr(err, c.closed.Load()) }

// RoundTrips counts the client's round trips to the node so far: request
// lists of one-sided operations and RPCs.
func (c *Client) RoundTrips() uint64 { return c.ops.Trips() + c.rpcs.Load() }

// Close implements kv.Store.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.rpc.Close() // operations in flight fail now
		c.life.Lock()
		if c.ops != nil {
			c.ops.Close()
		}
		c.life.Unlock()
	})
	return nil
}
