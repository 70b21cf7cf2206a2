package sherman

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/smart"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config configures a Client.
type Config struct {
	// Layout sizes the nodes; every client of a tree uses the same.
	Layout Layout
	// Slots is the operations in flight at once (default 16). Each
	// memory node's QP should have room for QPDepth(Slots) send
	// requests (a scan's list holds up to 16 READs; a fuller queue
	// makes posts wait for room).
	Slots int
	// Lease is how long a lock word may stay unchanged before other
	// clients presume its holder dead and take the lock over (default
	// 1 s; every client of a tree should use the same).
	Lease time.Duration
	// Poll is how the completion pollers wait (default adaptive).
	Poll verbs.PollPolicy
	// Logger receives the client's rare events (default: discard).
	Logger *slog.Logger
	// Smart, when set, makes the client Smart-BT: its operations run as
	// tasks of a smart runtime with the techniques it switches on
	// (&SmartConfig{} is Sherman+, no technique; nil is Sherman).
	Smart *SmartConfig
}

// Offsets in a slot's buffer.
const (
	offWord  = 0  // an atomic's result
	offGuard = 8  // the write-back guard's result
	offEntry = 64 // a leaf entry to write; then the nodes
)

// Client is a Sherman client: every operation is one-sided. It
// implements btree.Tree.
type Client struct {
	cfg    Config
	g      geometry
	conns  []Conn
	nnodes []int // nodes of each memory node
	ops    issuer
	id     uint64
	epoch  atomic.Uint64
	bg     context.Context // lists that hold or free locks run under it
	stop   context.CancelFunc
	closed atomic.Bool
	life   sync.RWMutex
	once   sync.Once

	locks lockTable
	cache cache
	root  atomic.Uint64 // the root as last seen; 0: read the root word

	amu   sync.Mutex // the allocator's chunk
	amn   int
	anext int
	aend  int

	offNode, offNode2 int // a slot's first two node buffers
	stride            int // from one node buffer to the next
	run               int // node buffers of a slot (a scan's READs in one list)

	handOvers, takeOvers, splits, hops atomic.Uint64

	spec                 *specCache // speculative lookup (SpecLookup), or nil
	specHits, specMisses atomic.Uint64

	owned func() error // what Dial opened for the client, closed by Close
}

var _ btree.Tree = (*Client)(nil)

// Open starts a client of the tree in the regions conns name (memory
// node 0 holds the root word). Zeroed regions are an empty tree; the
// first client writes the layout into each region's header, later ones
// check it (ErrLayout on a mismatch). The client owns nothing of conns:
// close them after Close.
func Open(ctx context.Context, pd verbs.PD, conns []Conn, cfg Config) (*Client, error) {
	l, err := cfg.Layout.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Layout = l
	if cfg.Slots <= 0 {
		cfg.Slots = 16
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Second
	}
	if cfg.Poll == (verbs.PollPolicy{}) {
		cfg.Poll = verbs.PollAdaptive
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(conns) == 0 || len(conns) > 1<<16 {
		return nil, fmt.Errorf("%w: sherman: %d memory nodes", verbs.ErrInvalidArg, len(conns))
	}
	c := &Client{cfg: cfg, g: newGeometry(l), conns: conns, id: rand.Uint64()>>24 | 1,
		locks: lockTable{m: map[uint64]*localLock{}}, cache: cache{m: map[uint64]*node{}}}
	for _, cn := range conns {
		n := int((cn.Region.Len - offLocks - 64) / uint64(c.g.size+8))
		if n < 1+chunkNodes {
			return nil, fmt.Errorf("%w: sherman: a region of %d B holds %d nodes of %d B", btree.ErrLayout, cn.Region.Len, n, c.g.size)
		}
		c.nnodes = append(c.nnodes, n)
	}
	c.offNode = offEntry + round8(c.g.leafEnt+63)&^63
	c.stride = (c.g.size + 63) &^ 63
	c.offNode2 = c.offNode + c.stride
	c.run = max(2, min(maxRun, runBytes/c.stride))
	size := c.offNode + c.run*c.stride
	if cfg.Smart == nil {
		c.ops, err = newQPIssuer(pd, conns, cfg.Slots, size, cfg.Poll)
	} else {
		sc := cfg.Smart.withDefaults()
		c.cfg.Smart = &sc
		if len(sc.Connect) != len(conns) {
			return nil, fmt.Errorf("%w: sherman: %d Smart Connects for %d memory nodes", verbs.ErrInvalidArg, len(sc.Connect), len(conns))
		}
		if sc.on(SpecLookup) {
			c.spec = newSpecCache(sc.SpecEntries)
		}
		c.ops, err = newSmartIssuer(ctx, pd, sc, size, cfg.Poll)
	}
	if err != nil {
		return nil, err
	}
	c.bg, c.stop = context.WithCancel(context.Background())
	if err := c.checkLayout(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkLayout writes the layout word into every region that has none
// and checks it in the others.
func (c *Client) checkLayout(ctx context.Context) error {
	s, err := c.ops.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.ops.release(s)
	want := c.cfg.Layout.word()
	for mn := range c.conns {
		got, err := c.casWord(s, mn, c.conns[mn].Region.Addr+offLayout, 0, want)
		if err != nil {
			return err
		}
		if got != 0 && got != want {
			return fmt.Errorf("%w: memory node %d holds a tree of layout %#x, not %#x (%+v)", btree.ErrLayout, mn, got, want, c.cfg.Layout)
		}
	}
	return nil
}

// Layout is the client's node layout (defaults filled in).
func (c *Client) Layout() Layout { return c.cfg.Layout }

// NodeSize is the bytes of one node.
func (c *Client) NodeSize() int { return c.g.size }

// Stats counts a client's events.
type Stats struct {
	RoundTrips uint64 // post lists run
	Splits     uint64 // nodes this client split
	Hops       uint64 // sibling pointers followed (a stale cache or a split under way)
	HandOvers  uint64 // global locks taken over from a task of the process (no round trip)
	TakeOvers  uint64 // global locks taken from a holder presumed dead
	BytesRead  uint64 // bytes the client's READs read
	SpecHits   uint64 // Gets served by speculative lookup (one entry read)
	SpecMisses uint64 // speculative entry reads that fell back to the leaf
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{RoundTrips: c.ops.trips(), Splits: c.splits.Load(), Hops: c.hops.Load(),
		HandOvers: c.handOvers.Load(), TakeOvers: c.takeOvers.Load(), BytesRead: c.ops.readBytes(),
		SpecHits: c.specHits.Load(), SpecMisses: c.specMisses.Load()}
}

// SmartStats returns each worker's figures (work-request limit,
// credits, backoff maximum, retry rate, n_max) of a Smart-BT or
// Sherman+ client; nil for Sherman.
func (c *Client) SmartStats() []smart.Stats {
	if q, ok := c.ops.(*smartIssuer); ok {
		return q.workerStats()
	}
	return nil
}

// newLease is a lock word of the client's that no earlier lock used.
func (c *Client) newLease() uint64 { return c.id<<24 | c.epoch.Add(1)&(1<<24-1) }

func (c *Client) rkey(mn int) uint32 { return c.conns[mn].Region.RKey }

// nodeAddr is the remote address of node p.
func (c *Client) nodeAddr(p uint64) uint64 {
	mn := ptrNode(p)
	base := (offLocks + 8*c.nnodes[mn] + 63) &^ 63
	return c.conns[mn].Region.Addr + uint64(base) + uint64(ptrIdx(p))*uint64(c.g.size)
}

// lockAddr is the memory node and remote address of node p's lock word.
func (c *Client) lockAddr(p uint64) (int, uint64) {
	mn := ptrNode(p)
	return mn, c.conns[mn].Region.Addr + offLocks + 8*uint64(ptrIdx(p))
}

// valid reports whether p names a node of the tree's regions.
func (c *Client) valid(p uint64) bool {
	mn, idx := ptrNode(p), ptrIdx(p)
	return mn < len(c.conns) && idx >= 0 && idx < c.nnodes[mn]
}

// enter checks the client is open and holds it open until leave.
func (c *Client) enter() error {
	c.life.RLock()
	if c.closed.Load() {
		c.life.RUnlock()
		return btree.ErrClosed
	}
	return nil
}

func (c *Client) leave() { c.life.RUnlock() }

// Close implements btree.Tree: the client's slots and pollers end (and
// what Dial opened for it closes). Its unused allocator chunk stays
// unused (a few nodes).
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.stop()
		c.life.Lock()
		c.ops.close()
		c.life.Unlock()
		if c.owned != nil {
			c.owned()
		}
	})
	return nil
}
