package race

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/rpc"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Poll is how the client's completion poller waits (default
	// adaptive).
	Poll verbs.PollPolicy
	// Slots is the number of operations in flight at once (default 16).
	// The QP needs room for about 6×Slots send requests.
	Slots int
	// Cache, when set, maps keys to the slot that last held them
	// (Smart-HT's speculative lookup): a GET of a cached key takes one
	// round trip, and so does a PUT that updates it. Nil: every operation
	// reads both combined buckets first (RACE).
	Cache *SlotCache
	// Backoff, when set, waits before retrying a lost CAS as Smart's
	// conflict avoidance does (truncated exponential backoff, with
	// Dynamic the limit follows the retry rate). Nil: retry at once (RACE),
	// backing off only after 8 losses in a row.
	Backoff *smart.BackoffConfig
	// Runtime, when set, runs the one-sided request lists as tasks of
	// this smart runtime (Smart-HT): on its workers' QPs to the node (it
	// must live on the client's device and PD), under their work-request
	// throttling. The connection given to NewClient then carries only the
	// RPCs. Nil: the lists go on that connection too.
	Runtime *smart.Runtime
	// SlotConns, when set (instead of Runtime), are connections of the
	// client's slots, one slot each (Slots is then one fewer: a slot is
	// the client's own): a slot's lists go on its own QP, and its caller
	// polls its own CQ — per-task QPs, the limit of Smart's per-thread
	// ones. Over shm a GET then completes on its task's goroutine. The
	// client owns them from then on (Close closes them).
	SlotConns []SlotConn
	// Lease is how long a subtable's split lock, the directory lock or a
	// subtable's writer count may stay unchanged before other clients
	// presume their holder dead and take over (default 1 s; every client
	// of a node should use the same). See "Failures" in the package
	// documentation.
	Lease time.Duration
}

// SlotConn is a client slot's own connection to the node
// (ClientConfig.SlotConns): a connected RC QP that only the slot posts on,
// whose completions alone go to CQ (both may be SingleThreaded), and
// Close, which releases them.
type SlotConn = remote.SlotConn

// Client is a RACE hashing client: every operation is one-sided. It
// implements kv.Store.
type Client struct {
	cfg    ClientConfig
	rpc    *rpc.Client
	ops    remote.Poster
	base   uint64
	rkey   uint32
	id     uint64
	closed atomic.Bool
	// bg bounds the requests a client sends while it holds something in
	// the table (a writer count, a lock): they finish even when the
	// caller's context ends, and end only when the client closes.
	bg    context.Context
	stop  context.CancelFunc
	epoch atomic.Uint64 // the client's lease epochs (lease.go)
	smu   sync.Mutex    // seen
	seen  map[uint64]sighting
	rpcs  atomic.Uint64
	once  sync.Once
	life  sync.RWMutex

	dmu   sync.RWMutex
	depth uint
	dir   []uint64
	rmu   sync.Mutex // one directory refresh or split at a time
	dirMR verbs.MR

	amu    sync.Mutex
	refill chan struct{} // one chunk refill at a time (refillChunk): capacity 1
	chunk  uint64
	end    uint64
	free   map[int][]uint64
	grace  []freedBlock
	splits atomic.Uint64
	misses atomic.Uint64

	bmu sync.Mutex
	bo  *smart.Backoff
}

var _ kv.Store = (*Client)(nil)

// Layout of an operation's buffer.
const (
	offCtl   = 0
	offCAS   = 8
	offEntry = 16
	offDepth = 24
	offTest  = 32 // a guard's masked CAS returns the word it tested here
	offTest2 = 40 // and a second guard in the same list here
	offLease = 48 // a lease word to write (lease.go)
	offC1    = 64
	offC2    = offC1 + 2*bucketBytes
	offBlock = offC2 + 2*bucketBytes
	maxBlock = (blockHead + kv.MaxKey + kv.MaxValue + 8 + 63) &^ 63
	offNew   = offBlock + maxBlock
	opBuf    = offNew + maxBlock
)

// Errors.
var errRetry = errors.New("race: retry")

// NewClient starts a client on qp, connected to a node's Serve.
func NewClient(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ, cfg ClientConfig) (*Client, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Second
	}
	if len(cfg.SlotConns) > 0 {
		if cfg.Runtime != nil {
			remote.CloseSlotConns(cfg.SlotConns)
			return nil, fmt.Errorf("%w: race: both a runtime and slot connections", verbs.ErrInvalidArg)
		}
		cfg.Slots = len(cfg.SlotConns) - 1
	}
	c := &Client{cfg: cfg, id: rand.Uint64() | 1, free: map[int][]uint64{}, refill: make(chan struct{}, 1), seen: map[uint64]sighting{}}
	if cfg.Backoff != nil {
		c.bo = smart.NewBackoff(*cfg.Backoff)
	}
	if len(cfg.SlotConns) > 0 {
		rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
		if err != nil {
			remote.CloseSlotConns(cfg.SlotConns)
			return nil, fmt.Errorf("race: %w", err)
		}
		ops, err := remote.NewSolo(pd, cfg.SlotConns, opBuf, cfg.Poll, rc)
		if err != nil {
			remote.CloseSlotConns(cfg.SlotConns)
			rc.Close()
			return nil, fmt.Errorf("race: %w", err)
		}
		c.rpc, c.ops = rc, ops
	} else if cfg.Runtime != nil {
		rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		ops, err := remote.NewTaskOps(ctx, pd, cfg.Runtime, cfg.Slots+1, opBuf)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("race: %w", err)
		}
		c.rpc, c.ops = rc, ops
	} else {
		rc, err := rpc.NewClient(pd, qp, cq, rpc.ClientConfig{MaxMessage: rpc.MinMessage, Slots: 4, Poll: cfg.Poll})
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		ops, err := remote.New(pd, qp, cfg.Slots+1, opBuf, rc)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("race: %w", err)
		}
		c.rpc, c.ops = rc, ops
	}
	c.bg, c.stop = context.WithCancel(context.Background())
	var err error
	if c.dirMR, err = pd.AllocMR(max(8<<MaxDepth, subtableSize)+64, verbs.AccessLocalWrite); err != nil {
		c.Close()
		return nil, fmt.Errorf("race: %w", err)
	}
	var info [12]byte
	if _, err := c.rpc.Call(ctx, methodInfo, nil, info[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("race: node info: %w", c.mapErr(err))
	}
	c.base, c.rkey = binary.LittleEndian.Uint64(info[:]), binary.LittleEndian.Uint32(info[8:])
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Splits is how many subtable splits this client performed.
func (c *Client) Splits() uint64 { return c.splits.Load() }

// Depth is the global depth the client's directory cache holds.
func (c *Client) Depth() int {
	c.dmu.RLock()
	defer c.dmu.RUnlock()
	return int(c.depth)
}

// do runs one list on a slot and checks the signaled completion.
func (c *Client) do(ctx context.Context, s remote.Slot, wrs []verbs.SendWR) error {
	wc, err := c.ops.Do(ctx, s, wrs)
	if err != nil {
		return err
	}
	// A CONDITIONAL request whose guard failed completes skipped: the
	// caller tells from the buffers (a guard's word, a CAS result left
	// as it was).
	if wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusSkipped {
		return fmt.Errorf("%w: %v: %w", kv.ErrUnreachable, wc.Opcode, wc.Status.Err())
	}
	return nil
}

// Get implements kv.Store.
func (c *Client) Get(ctx context.Context, key, dst []byte) ([]byte, error) {
	if err := kv.Check(key, nil); err != nil {
		return dst, err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return dst, kv.ErrClosed
	}
	return c.get(ctx, key, dst)
}

// Put implements kv.Store.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if err := kv.Check(key, value); err != nil {
		return err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return kv.ErrClosed
	}
	return c.write(ctx, key, value, false)
}

// Delete implements kv.Store.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	if err := kv.Check(key, nil); err != nil {
		return err
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return kv.ErrClosed
	}
	return c.write(ctx, key, nil, true)
}

// putBack releases slot s after a request list failed with err, unless
// the list's context ended: the Poster then releases the slot itself once
// the list completes (a second release would hand one buffer to two
// operations).
func (c *Client) putBack(s remote.Slot, err error) {
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.ops.Release(s)
	}
}

// mapErr turns RPC and connection errors into kv's.
func (c *Client) mapErr(err error) error { return remote.MapErr(err, c.closed.Load()) }

// RoundTrips counts the client's round trips to the node so far: request
// lists of one-sided operations and RPCs.
func (c *Client) RoundTrips() uint64 { return c.ops.Trips() + c.rpcs.Load() }

// Close implements kv.Store.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.returnMemory()
		c.closed.Store(true)
		c.stop() // requests under bg end now
		c.rpc.Close()
		c.life.Lock()
		if c.ops != nil {
			c.ops.Close()
		}
		if c.dirMR != nil {
			c.dirMR.Deregister()
		}
		c.life.Unlock()
	})
	return nil
}
