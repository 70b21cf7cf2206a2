package abdrpc

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/blockstore"
	"github.com/rdmakit/rdmakit/blockstore/replica"
	"github.com/rdmakit/rdmakit/verbs"
)

// Defaults and limits of Config.
const (
	// DefaultSlots is the calls a client keeps in flight per replica:
	// the receives a replica posts per connection by default
	// (replica.Config.Recvs).
	DefaultSlots = 16
	// MaxSlots bounds Config.Slots: the client posts two receives per
	// slot and a connection takes replica.QPCap.MaxRecvWR.
	MaxSlots = 32
	// DefaultRedial is the first wait before re-dialing a replica that
	// failed; it doubles up to DefaultMaxRedial.
	DefaultRedial    = 20 * time.Millisecond
	DefaultMaxRedial = time.Second
	// RedialTimeout bounds one attempt to re-dial a replica.
	RedialTimeout = 2 * time.Second
	// claimAttempts bounds the random client ids Dial tries.
	claimAttempts = 16
)

// Config says how a client reaches a volume's replicas.
type Config struct {
	// Replicas are the replicas' connection manager addresses (host:port),
	// the volume's replica list: an odd count, distinct
	// (blockstore.CheckReplicas).
	Replicas []string
	// Device is the URI of the client's own device, opened by Dial; the
	// replicas must reach it (tcp://…, or shm://… on their host, or
	// loop://fabric/node in one process).
	Device string
	// Dev, when not nil, is the device the client uses instead of
	// opening Device: many clients of a process can share one. The
	// client does not close it.
	Dev verbs.Device
	// Token is the replicas' auth token (memnode.Config.Token); empty
	// when they have none. A tcp device also presents it (token=).
	Token string
	// Slots is the calls in flight per replica (default DefaultSlots, at
	// most MaxSlots and at most the replicas' replica.Config.Recvs).
	Slots int
	// Poll is how the connections' pollers wait (default adaptive).
	Poll verbs.PollPolicy
	// Redial and MaxRedial are the first and the longest wait between
	// attempts to re-dial a failed replica (defaults DefaultRedial,
	// DefaultMaxRedial).
	Redial, MaxRedial time.Duration
	// Logger receives replicas going down and coming back (default
	// slog.Default()).
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if err := blockstore.CheckReplicas(c.Replicas); err != nil {
		return err
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.Slots < 0 || c.Slots > MaxSlots {
		return fmt.Errorf("abdrpc: %d slots (1 to %d): %w", c.Slots, MaxSlots, verbs.ErrInvalidArg)
	}
	if c.Redial <= 0 {
		c.Redial = DefaultRedial
	}
	if c.MaxRedial < c.Redial {
		c.MaxRedial = max(DefaultMaxRedial, c.Redial)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// deviceURI is uri with the token as its token= query parameter.
func deviceURI(uri, token string) (string, error) {
	if token == "" {
		return uri, nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("abdrpc: device %q: %w: %w", uri, verbs.ErrInvalidArg, err)
	}
	q := u.Query()
	q.Set("token", token)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Client is a client of one volume, running ABD over the replicas'
// RPCs. It implements blockstore.Store; its methods are safe for
// concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	dev    verbs.Device
	ownDev bool // opened by the client: Close closes it
	pd     verbs.PD
	reps   []*member
	q      int // a majority of len(reps)

	// Set by Dial before any operation, constant after.
	layout blockstore.Layout
	msg    int            // the data connections' rpc MaxMessage
	id     uint32         // the claimed client id, in every write's tag
	tags   replica.Issuer // this client's write tags
	ready  atomic.Bool
	ops    sync.Pool // *op for Read and Write
	// noWriteBack drops reads' write-back phase: only the negative
	// control of the linearizability tests sets it (export_test.go).
	noWriteBack bool
	trips       atomic.Uint64 // calls sent

	upMu sync.Mutex
	up   chan struct{} // closed (and replaced) when a replica comes back

	lifeMu  sync.Mutex // closed and wg.Add
	closed  bool
	wg      sync.WaitGroup // watchers and re-dialers
	stop    chan struct{}
	stopCtx context.Context
	cancel  context.CancelFunc
}

var _ blockstore.Store = (*Client)(nil)

// member is one replica of the volume as the client sees it.
type member struct {
	idx       int
	addr      string
	link      atomic.Pointer[link] // nil while down
	redialing atomic.Bool
}

// open checks cfg and opens the client's device; no replica is dialed.
func open(cfg Config) (*Client, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	dev, own := cfg.Dev, cfg.Dev == nil
	if own {
		uri, err := deviceURI(cfg.Device, cfg.Token)
		if err != nil {
			return nil, err
		}
		if dev, err = verbs.Open(uri); err != nil {
			return nil, fmt.Errorf("abdrpc: %w", err)
		}
	}
	pd, err := dev.AllocPD()
	if err != nil {
		if own {
			dev.Close()
		}
		return nil, fmt.Errorf("abdrpc: %w", err)
	}
	c := &Client{cfg: cfg, log: cfg.Logger, dev: dev, ownDev: own, pd: pd, q: blockstore.Quorum(len(cfg.Replicas)),
		up: make(chan struct{}), stop: make(chan struct{})}
	c.stopCtx, c.cancel = context.WithCancel(context.Background())
	for i, a := range cfg.Replicas {
		c.reps = append(c.reps, &member{idx: i, addr: a})
	}
	return c, nil
}

// Layout implements blockstore.Store.
func (c *Client) Layout() blockstore.Layout { return c.layout }

// ID is the client id this client's writes carry in their tags.
func (c *Client) ID() uint32 { return c.id }

// Connected is how many replicas the client has a working connection
// to.
func (c *Client) Connected() int {
	n := 0
	for _, m := range c.reps {
		if m.link.Load() != nil {
			n++
		}
	}
	return n
}

// RoundTrips counts the client's round trips so far: one per call sent
// to a replica (every phase calls every replica it can), as
// blockstore/prismrs counts its lists.
func (c *Client) RoundTrips() uint64 { return c.trips.Load() }

// spawn runs f on a goroutine Close waits for, unless the client is
// closed (then it reports false and f does not run).
func (c *Client) spawn(f func()) bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// upSignal is closed the next time a replica comes back.
func (c *Client) upSignal() <-chan struct{} {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	return c.up
}

// signalUp wakes the operations waiting for a replica to come back.
func (c *Client) signalUp() {
	c.upMu.Lock()
	close(c.up)
	c.up = make(chan struct{})
	c.upMu.Unlock()
}

// Close implements blockstore.Store: it stops the re-dialers, closes
// every connection (operations in flight fail with
// blockstore.ErrClosed) and the device.
func (c *Client) Close() error {
	c.lifeMu.Lock()
	if c.closed {
		c.lifeMu.Unlock()
		return nil
	}
	c.closed = true
	c.lifeMu.Unlock()
	close(c.stop)
	c.cancel()
	c.wg.Wait()
	for _, m := range c.reps {
		if l := m.link.Swap(nil); l != nil {
			l.close()
		}
	}
	if !c.ownDev {
		return c.pd.Dealloc()
	}
	return c.dev.Close()
}

// isClosed reports whether Close has begun.
func (c *Client) isClosed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}
