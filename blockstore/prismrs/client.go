package prismrs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config says how to reach a volume's replicas.
type Config struct {
	// Device is the URI of the client's own device, opened by Dial (the
	// replicas must reach it: tcp://…, or shm://… on their host).
	Device string
	// Dev, when not nil, is the device the client uses instead of
	// opening Device: many clients of a process can share one. The
	// client does not close it.
	Dev verbs.Device
	// Replicas are the replicas' connection manager addresses
	// (host:port), as in the volume's layout.
	Replicas []string
	// Token is the replicas' auth token; empty when they have none.
	Token string
	// Slots is the number of lists in flight per replica (default 64).
	// An operation holds one at each replica it posts to until that
	// replica answers, even after the operation has returned.
	Slots int
	// ReturnBatch is how many replaced buffers the client gathers before
	// returning them to a replica in one batch (default 32).
	ReturnBatch int
	// Poll is how the client's completion pollers wait (default
	// adaptive).
	Poll verbs.PollPolicy
	// Thrifty sends each phase to a majority of the replicas only, the
	// first of the replica list, instead of to all of them: a third less
	// work for the replicas (n = 3) and no write-back between clients that
	// agree on the order. A phase turns to the other replicas when one
	// of the first fails or has not answered within ThriftyWait (default
	// 1 ms) or 4 times the phases' moving average, whichever is longer.
	// The replicas left out fall behind, and are brought up to date by
	// the reads that meet them.
	Thrifty     bool
	ThriftyWait time.Duration
	// Timeout is the connections' retry timeout (default
	// replica.ClientTimeout): a replica that answers nothing for 8 times
	// as long loses its connection, which the client then dials again
	// in the background.
	Timeout time.Duration
}

func (c *Config) defaults() {
	if c.Slots <= 0 {
		c.Slots = 64
	}
	if c.Slots > int(verbs.LowMask) {
		c.Slots = int(verbs.LowMask)
	}
	if c.ThriftyWait <= 0 {
		c.ThriftyWait = time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = replica.ClientTimeout
	}
	if c.ReturnBatch <= 0 {
		c.ReturnBatch = 32
	}
	c.ReturnBatch = min(c.ReturnBatch, returnMax)
}

// Client is a PRISM-RS client of one volume: multi-writer ABD whose
// phases are one-sided PRISM operations at every replica. It implements
// blockstore.Store.
type Client struct {
	cfg    Config
	layout blockstore.Layout
	dev    verbs.Device
	ownDev bool // opened by the client: Close closes it
	pd     verbs.PD
	reps   []atomic.Pointer[rconn] // by replica index; nil while not connected
	quorum int
	id     uint32 // this client's id in its tags

	acq  sync.Mutex // one operation acquires slots at a time
	note notifier   // a slot was released, or a connection failed

	life    sync.RWMutex
	closed  atomic.Bool
	once    sync.Once
	stop    chan struct{}  // closes with Close: reconnections stop
	wg      sync.WaitGroup // reconnections
	smu     sync.Mutex
	stopped bool // under smu: no more reconnections

	tags replica.Issuer // this client's write tags

	// noWriteBack skips a read's phase 2 (tests' negative control).
	noWriteBack bool
	// Counters.
	trips, lists, writeBacks atomic.Uint64
	phaseAvg                 atomic.Int64 // moving average of a phase's duration, ns
}

var _ blockstore.Store = (*Client)(nil)

// Dial connects to the replicas of an existing volume and learns its
// layout from them: a majority must hold it.
func Dial(ctx context.Context, cfg Config) (*Client, error) { return open(ctx, cfg, nil) }

// Create creates a volume of blocks blocks of blockSize bytes on the
// replicas (a majority must take it; creating the same volume again is
// harmless) and connects to it.
func Create(ctx context.Context, cfg Config, blockSize int, blocks uint64) (*Client, error) {
	l := blockstore.Layout{BlockSize: blockSize, Blocks: blocks, Replicas: cfg.Replicas}
	if err := l.Check(); err != nil {
		return nil, err
	}
	return open(ctx, cfg, &l)
}

// open connects to cfg.Replicas, creates the volume of create (when not
// nil) or reads its layout, and claims a client id.
func open(ctx context.Context, cfg Config, create *blockstore.Layout) (_ *Client, err error) {
	cfg.defaults()
	if err := blockstore.CheckReplicas(cfg.Replicas); err != nil {
		return nil, err
	}
	dev, own := cfg.Dev, false
	if dev == nil {
		if dev, err = verbs.Open(cfg.Device); err != nil {
			return nil, err
		}
		own = true
	}
	pd, err := dev.AllocPD()
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, err
	}
	c := &Client{cfg: cfg, dev: dev, ownDev: own, pd: pd, reps: make([]atomic.Pointer[rconn], len(cfg.Replicas)), quorum: blockstore.Quorum(len(cfg.Replicas)),
		stop: make(chan struct{})}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	conns, infos, err := c.connect(ctx, create)
	if err != nil {
		return nil, err
	}
	for i, r := range conns {
		if r != nil {
			if err := r.start(infos[i], cfg.Slots); err != nil {
				return nil, err
			}
			c.reps[i].Store(r)
		}
	}
	if err := c.claim(ctx); err != nil {
		return nil, err
	}
	for i, r := range conns {
		if r == nil {
			c.reconnect(i, nil)
		}
	}
	return c, nil
}

// connect dials every replica and asks each for the volume (creating it
// with create); it keeps the replicas that hold the volume the majority
// holds, and fails unless a majority does.
func (c *Client) connect(ctx context.Context, create *blockstore.Layout) (_ []*rconn, _ []replica.Info, err error) {
	n := len(c.cfg.Replicas)
	conns := make([]*rconn, n)
	defer func() {
		for _, r := range conns {
			if r != nil && err != nil {
				r.close()
			}
		}
	}()
	infos := make([]replica.Info, n)
	errs := make([]error, n)
	var req []byte
	method := uint16(replica.MethodInfo)
	if create != nil {
		if req, err = replica.MarshalLayout(*create); err != nil {
			return nil, nil, err
		}
		method = replica.MethodCreate
	}
	var wg sync.WaitGroup
	for i, addr := range c.cfg.Replicas {
		wg.Go(func() {
			r, err := c.dial(ctx, i, addr)
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = r
			b, err := r.call(ctx, method, req)
			if err == nil {
				infos[i], err = replica.UnmarshalInfo(b)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var agreed *blockstore.Layout
	members := 0
	for i := range n {
		if errs[i] != nil {
			continue
		}
		l := infos[i].Layout
		switch {
		case !blockstore.SameReplicas(l.Replicas, c.cfg.Replicas):
			errs[i] = fmt.Errorf("%w: replica %s holds a volume of replicas %v", blockstore.ErrNoVolume, c.cfg.Replicas[i], l.Replicas)
		case agreed == nil:
			agreed = &l
		case l.BlockSize != agreed.BlockSize || l.Blocks != agreed.Blocks:
			return nil, nil, fmt.Errorf("%w: the replicas disagree on the layout (%d×%d B, %d×%d B)", blockstore.ErrNoVolume,
				l.Blocks, l.BlockSize, agreed.Blocks, agreed.BlockSize)
		}
		if errs[i] == nil {
			members++
		}
	}
	for i, r := range conns {
		if r != nil && errs[i] != nil {
			r.close()
			conns[i] = nil
		}
	}
	if members < c.quorum {
		err := errors.Join(errs...)
		for _, e := range errs {
			if errors.Is(e, replica.ErrExists) {
				return nil, nil, e
			}
		}
		if errors.Is(err, blockstore.ErrNoVolume) {
			return nil, nil, fmt.Errorf("%w: %d of %d replicas hold it: %w", blockstore.ErrNoVolume, members, n, err)
		}
		return nil, nil, fmt.Errorf("%w: %d of %d replicas answered: %w", blockstore.ErrNoQuorum, members, n, err)
	}
	c.layout = *agreed
	c.layout.Replicas = slices.Clone(c.cfg.Replicas)
	return conns, infos, nil
}

// maxClaims bounds the ids a client tries before it gives up.
const maxClaims = 16

// claim takes a client id that no other live client holds: granted by
// a majority and refused by none.
func (c *Client) claim(ctx context.Context) error {
	for range maxClaims {
		id := rand.Uint32()
		req := binary.LittleEndian.AppendUint32(nil, id)
		var granted, taken atomic.Int32
		var wg sync.WaitGroup
		for i := range c.reps {
			r := c.rep(i)
			if r == nil {
				continue
			}
			wg.Go(func() {
				_, err := r.call(ctx, replica.MethodClaim, req)
				switch {
				case err == nil:
					granted.Add(1)
				case errors.Is(err, replica.ErrIDTaken):
					taken.Add(1)
				}
			})
		}
		wg.Wait()
		if taken.Load() == 0 && int(granted.Load()) >= c.quorum {
			c.id = id
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%w: no client id granted by a majority", blockstore.ErrNoQuorum)
}

// Layout implements blockstore.Store.
func (c *Client) Layout() blockstore.Layout { return c.layout }

// ID is the client's id, the low half of its tags.
func (c *Client) ID() uint32 { return c.id }

// RoundTrips counts the requests the client sent so far: one list of
// one-sided operations per replica a phase reached (a read that needs no
// write-back is 3 on 3 replicas, all in parallel; a write 6), as
// blockstore/abdrpc counts its calls.
func (c *Client) RoundTrips() uint64 { return c.lists.Load() }

// Phases counts the round trips the client's operations waited for: one
// per phase, whose lists go to every replica at once (a read 1 or 2, a
// write 2).
func (c *Client) Phases() uint64 { return c.trips.Load() }

// Connected is how many replicas the client has a working connection
// to.
func (c *Client) Connected() int { return c.reachable(c.all()) }

// WriteBacks counts the reads that needed their write-back phase.
func (c *Client) WriteBacks() uint64 { return c.writeBacks.Load() }

// signal tells the operations waiting for slots that one was released.
func (c *Client) signal() { c.note.signal() }

// notifier wakes every goroutine waiting when it is signaled.
type notifier struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next signal; nil when nobody waits
}

// wait returns a channel that closes at the next signal.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// signal wakes the waiters.
func (n *notifier) signal() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// Close implements blockstore.Store: it returns the replaced buffers
// still queued and closes the connections and the device.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.smu.Lock()
		c.stopped = true
		c.smu.Unlock()
		close(c.stop)
		c.wg.Wait()
		c.life.Lock() // no operation runs
		defer c.life.Unlock()
		for i := range c.reps {
			if r := c.rep(i); r != nil {
				r.close()
			}
		}
		c.pd.Dealloc()
		if c.ownDev {
			c.dev.Close()
		}
	})
	return nil
}
