package farm

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config says how a client reaches a database's nodes.
type Config struct {
	// Device is the URI of the client's own device, opened by Dial (the
	// nodes must reach it: tcp://…, or loop://fabric/name in tests).
	Device string
	// Dev, when not nil, is the device the client uses instead of
	// opening Device; the client does not close it.
	Dev verbs.Device
	// Nodes are the nodes' cm addresses, in the layout's order.
	Nodes []string
	// Token is the nodes' auth token; empty when they have none.
	Token string
	// Slots is the number of one-sided request lists in flight per node
	// (default 32).
	Slots int
	// MaxMessage must be the nodes' Config.MaxMessage (default
	// DefaultMaxMessage).
	MaxMessage int
	// Poll is how the client's completion pollers wait (default
	// adaptive).
	Poll verbs.PollPolicy
	// SkipValidation turns VALIDATE off: the transactions' reads are
	// not checked again before commit. It is not serializable (write
	// skew passes): the serializability checker's negative control.
	SkipValidation bool
}

func (c *Config) defaults() {
	if c.Slots <= 0 {
		c.Slots = 32
	}
	c.Slots = min(c.Slots, slotMask+1)
	if c.MaxMessage <= 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.Poll == (verbs.PollPolicy{}) {
		c.Poll = verbs.PollAdaptive
	}
}

// Step is a point of a commit, where tests stop a coordinator.
type Step uint8

// Steps of a commit, in order; a coordinator stopped at one has done
// everything before it.
const (
	StepLocked    Step = iota + 1 // every written primary locked
	StepValidated                 // the read set validated
	StepBackup                    // one more COMMIT-BACKUP record acknowledged (once per backup record)
	StepBackedUp                  // every COMMIT-BACKUP record acknowledged
	StepPrimary                   // one more COMMIT-PRIMARY record acknowledged (once per primary)
	StepCommitted                 // every COMMIT-PRIMARY record acknowledged, before truncation
)

// DB is a FaRM client: a coordinator of transactions over every node of
// a database. It implements txn.DB.
type DB struct {
	cfg    Config
	layout Layout
	dev    verbs.Device
	ownDev bool
	pd     verbs.PD
	id     uint64 // this coordinator's id at the nodes
	seq    atomic.Uint64
	conns  []atomic.Pointer[conn]
	locs   sync.Map      // key string → slot int: where a key lives in its primary's table (keys never move)
	failed atomic.Uint64 // connections lost so far: the others are probed before their next commit
	stats  counters

	stop    chan struct{}
	wg      sync.WaitGroup
	rmu     sync.Mutex
	redial  []bool // under rmu: a reconnection to node i runs
	closed  atomic.Bool
	hook    func(Step) bool // tests: false stops the coordinator there
	flushMu sync.Mutex
}

var _ txn.DB = (*DB)(nil)

// Create lays the database out on the nodes (creating the same layout
// again is harmless) and connects to it. l.Nodes defaults to cfg.Nodes.
func Create(ctx context.Context, cfg Config, l Layout) (*DB, error) {
	if l.Nodes == nil {
		l.Nodes = cfg.Nodes
	}
	l.defaults()
	if err := l.check(); err != nil {
		return nil, err
	}
	cfg.Nodes = l.Nodes
	return open(ctx, cfg, &l)
}

// Dial connects to the nodes of a database that exists.
func Dial(ctx context.Context, cfg Config) (*DB, error) { return open(ctx, cfg, nil) }

func open(ctx context.Context, cfg Config, create *Layout) (_ *DB, err error) {
	cfg.defaults()
	db := &DB{cfg: cfg, dev: cfg.Dev, id: rand.Uint64() | 1, conns: make([]atomic.Pointer[conn], len(cfg.Nodes)),
		redial: make([]bool, len(cfg.Nodes)), stop: make(chan struct{})}
	if db.dev == nil {
		if db.dev, err = verbs.Open(cfg.Device); err != nil {
			return nil, err
		}
		db.ownDev = true
	}
	if db.pd, err = db.dev.AllocPD(); err != nil {
		db.closeDev()
		return nil, err
	}
	for i := range cfg.Nodes {
		c, l, err := db.dialConn(ctx, i, create)
		if err == nil && i > 0 && !l.equal(&db.layout) {
			c.close()
			err = fmt.Errorf("%w: node %d holds another layout", ErrLayout, i)
		}
		if err == nil && len(l.Nodes) != len(cfg.Nodes) {
			c.close()
			err = fmt.Errorf("%w: %d nodes in the layout, %d configured", ErrLayout, len(l.Nodes), len(cfg.Nodes))
		}
		if err != nil {
			db.Close()
			return nil, err
		}
		db.layout = l
		db.conns[i].Store(c)
	}
	db.wg.Add(1)
	go db.flusher()
	return db, nil
}

// Layout is the database's layout.
func (db *DB) Layout() Layout { return db.layout }

// conn returns the connection to node i, or ErrUnreachable while it has
// none.
func (db *DB) conn(i int) (*conn, error) {
	if db.closed.Load() {
		return nil, txn.ErrClosed
	}
	if c := db.conns[i].Load(); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: node %d: reconnecting", txn.ErrUnreachable, i)
}

// Backoff between attempts to reach a node again.
const (
	redialMin = 5 * time.Millisecond
	redialMax = 500 * time.Millisecond
)

// lost replaces the failed connection c in the background: it closes c
// and dials the node until it answers.
func (db *DB) lost(c *conn) {
	if !db.conns[c.idx].CompareAndSwap(c, nil) {
		return
	}
	db.failed.Add(1)
	db.rmu.Lock()
	defer db.rmu.Unlock()
	if db.closed.Load() || db.redial[c.idx] {
		go c.close()
		return
	}
	db.redial[c.idx] = true
	db.wg.Go(func() {
		defer func() {
			db.rmu.Lock()
			db.redial[c.idx] = false
			db.rmu.Unlock()
		}()
		c.close()
		wait := redialMin
		for {
			select {
			case <-db.stop:
				return
			case <-time.After(wait):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n, _, err := db.dialConn(ctx, c.idx, nil)
			cancel()
			if err == nil {
				if db.closed.Load() {
					n.close()
					return
				}
				db.conns[c.idx].Store(n)
				return
			}
			slog.Debug("farm: node not back yet", "node", c.idx, "err", err)
			wait = min(2*wait, redialMax)
		}
	})
}

// flushEvery is how often the truncations a connection owes are written
// when no record carried them.
const flushEvery = 2 * time.Millisecond

// flusher writes owed truncations in records of their own.
func (db *DB) flusher() {
	defer db.wg.Done()
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			db.flush()
		}
	}
}

// flush writes every connection's owed truncations.
func (db *DB) flush() {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	for i := range db.conns {
		c := db.conns[i].Load()
		for c != nil && c.pendingTrunc() > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.appendRecord(ctx, &record{kind: recTruncate})
			cancel()
			if err != nil {
				break
			}
		}
	}
}

// Close implements txn.DB: it writes the truncations still owed and
// closes the connections.
func (db *DB) Close() error {
	if db.closed.Load() {
		return nil
	}
	db.flush()
	if !db.closed.CompareAndSwap(false, true) {
		return nil
	}
	db.rmu.Lock()
	close(db.stop)
	db.rmu.Unlock()
	db.wg.Wait()
	for i := range db.conns {
		if c := db.conns[i].Swap(nil); c != nil {
			c.close()
		}
	}
	return db.closeDev()
}

func (db *DB) closeDev() error {
	if db.pd != nil {
		db.pd.Dealloc()
	}
	if db.ownDev {
		return db.dev.Close()
	}
	return nil
}

// Begin implements txn.DB.
func (db *DB) Begin(ctx context.Context) (txn.Tx, error) {
	if db.closed.Load() {
		return nil, txn.ErrClosed
	}
	return &Tx{db: db, ctx: ctx, reads: map[string]*readEnt{}, writes: map[string]*writeEnt{}}, nil
}
