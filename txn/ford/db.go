package ford

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config says how to reach the memory nodes and how the client behaves.
type Config struct {
	// Nodes are the memory nodes' cm addresses (memnode servers with one
	// region of at least Layout.NodeBytes), one shard each; every client
	// lists them in the same order.
	Nodes []string
	// Device is the URI of the client's device, opened by Dial; Dev,
	// when not nil, is a device to use instead (not closed by the DB).
	Device string
	Dev    verbs.Device
	// Token is the nodes' auth token (and the membership's).
	Token string
	// Members, when not empty, are the nodes' membership addresses
	// (host:port, TCP; NodeConfig.Members), in the same order as Nodes:
	// the client learns the configuration from them, routes by it and
	// follows it when a node is taken out (doc.go, Failover); Lease is
	// then at most the nodes' NodeConfig.Lease and Skew at least their
	// NodeConfig.Skew. Empty: the layout's placement, and a dead node's
	// shards are unavailable.
	Members []string
	// Layout is the database's shape (defaults: see Layout).
	Layout Layout
	// Lease is how long a transaction's locks are its own (default and
	// at most MaxLease): after it, plus Skew, any client may recover them.
	Lease time.Duration
	// Margin is how much of its lease a coordinator must have left to
	// write its log or write in place (default Lease/5). It must cover
	// Skew plus the time a posted request takes to land.
	Margin time.Duration
	// Skew bounds the difference between any two clients' clocks
	// (default 5 ms); it must be below Margin.
	Skew time.Duration
	// BackupReads makes Get read records from a backup copy (when the
	// shard has one) instead of the primary.
	BackupReads bool
	// SkipValidation turns read-set validation off: the negative control
	// of the serializability checker (write skew then commits). Never
	// for real use.
	SkipValidation bool
	// MaxTx bounds the transactions open at once (default 64): each holds
	// a coordinator id, its log area and a registered buffer.
	MaxTx int
	// Poll is how the poller waits for completions (default adaptive).
	Poll verbs.PollPolicy
	// Hook, when set, is called at each step of every read-write commit;
	// false stops the coordinator there as if it crashed (Commit returns
	// ErrStopped and leaves its locks and log). For fault tests and
	// process-kill harnesses.
	Hook func(Step) bool
	// Logger receives the client's logs (default slog.Default()).
	Logger *slog.Logger
	// Smart, when set, makes the client Smart-DTX: its transactions run
	// as tasks of a smart runtime's workers, each with its own QPs and
	// CQ, with the techniques it switches on (smartdtx.go, doc.go).
	Smart *SmartConfig
}

// MaxLease is the longest lease a lock may have.
const MaxLease = time.Second

func (c *Config) defaults() {
	c.Layout.defaults()
	if c.Lease <= 0 || c.Lease > MaxLease {
		c.Lease = MaxLease
	}
	if c.Margin <= 0 || c.Margin >= c.Lease {
		c.Margin = c.Lease / 5
	}
	if c.Skew <= 0 {
		c.Skew = 5 * time.Millisecond
	}
	c.Skew = min(c.Skew, c.Margin/2)
	if c.MaxTx <= 0 {
		c.MaxTx = 64
	}
	c.MaxTx = min(c.MaxTx, 1<<15)
	if c.Poll == (verbs.PollPolicy{}) {
		c.Poll = verbs.PollAdaptive
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DB is a FORD client: it implements txn.DB. Safe for concurrent use.
type DB struct {
	cfg    Config
	lay    Layout
	dev    verbs.Device
	ownDev bool
	pd     verbs.PD
	cq     verbs.CQ
	nodes  []*node // by index; nil for a node out (or unreachable) at Dial
	n      int     // the nodes of the layout
	fab    *fabric
	sdtx   *smartIssuer // Smart-DTX's issuer (Config.Smart)
	iss    issuer
	log    *slog.Logger
	nonce  uint64 // this client's claim word
	arena  arena

	keys sync.Map // string → int: a key's slot (keys never move)

	cmu    sync.Mutex
	free   []*coord
	coords []atomic.Pointer[coord] // by index, for the poller
	ncoord int
	open   map[*Tx]struct{}
	sem    chan struct{} // MaxTx tokens
	smu    sync.Mutex    // the setup coordinator's rounds, one at a time
	setup  *coord        // for Dial, claims and Sweep's scan
	rmu    sync.Mutex    // recoveries, one at a time
	recov  *coord        // the recoveries' coordinator (claimed at the first)

	closed atomic.Bool
	life   sync.RWMutex // rounds hold it shared; Close exclusively

	view       atomic.Pointer[view] // what transactions begin under (view.go)
	params     params               // the membership's leases (fixed at Dial)
	qmu        sync.Mutex           // queries of the membership, one at a time
	lastMember int
	kick       chan struct{} // wakes the renewer
	rctx       context.Context
	rcancel    context.CancelFunc
	rwg        sync.WaitGroup
	frozen     atomic.Bool // tests: no renewal (a client cut from the membership)

	stats counters
}

var _ txn.DB = (*DB)(nil)

// Dial connects to every node, checks (or writes, for the first client)
// the layout's fingerprint in their headers.
func Dial(ctx context.Context, cfg Config) (_ *DB, err error) {
	cfg.smartDefaults()
	cfg.defaults()
	if err := cfg.Layout.check(len(cfg.Nodes)); err != nil {
		return nil, err
	}
	if len(cfg.Members) > 0 && len(cfg.Members) != len(cfg.Nodes) {
		return nil, fmt.Errorf("%w: %d membership addresses for %d nodes", ErrLayout, len(cfg.Members), len(cfg.Nodes))
	}
	db := &DB{cfg: cfg, lay: cfg.Layout, log: cfg.Logger, nonce: rand.Uint64() | 1<<63, open: map[*Tx]struct{}{},
		coords: make([]atomic.Pointer[coord], 2*cfg.MaxTx+64), sem: make(chan struct{}, cfg.MaxTx), n: len(cfg.Nodes)}
	db.view.Store(staticView(db.n, db.lay.F))
	if len(cfg.Members) > 0 {
		db.view.Store(nil)
		if err := db.learn(ctx); err != nil {
			return nil, err
		}
		// The nodes bound the leases every client counts with (the hold
		// before a new epoch is used counts on them).
		if db.params.lease < db.cfg.Lease {
			db.cfg.Lease = db.params.lease
			db.cfg.Margin = min(db.cfg.Margin, db.cfg.Lease/5)
		}
		db.cfg.Skew = min(max(db.cfg.Skew, db.params.skew), db.cfg.Margin/2)
	}
	db.arena = newArena(&db.lay)
	db.dev = cfg.Dev
	if db.dev == nil {
		if db.dev, err = verbs.Open(cfg.Device); err != nil {
			return nil, err
		}
		db.ownDev = true
	}
	defer func() {
		if err != nil {
			db.teardown()
		}
	}()
	if db.pd, err = db.dev.AllocPD(); err != nil {
		return nil, err
	}
	if db.cq, err = db.dev.CreateCQ(8192); err != nil {
		return nil, err
	}
	need := uint64(db.lay.NodeBytes())
	v := db.view.Load()
	for i, addr := range cfg.Nodes {
		if v.out(i) {
			db.nodes = append(db.nodes, nil)
			continue
		}
		n, err := dialNode(ctx, db.dev, db.pd, db.cq, i, addr, cfg.Token)
		if err != nil && len(cfg.Members) > 0 {
			// Not out (yet): its operations fail until it is.
			db.log.Warn("ford: a node unreachable", "node", addr, "err", err)
			db.nodes = append(db.nodes, nil)
			continue
		}
		if err != nil {
			return nil, err
		}
		db.nodes = append(db.nodes, n)
		if n.size < need {
			return nil, fmt.Errorf("%w: node %s serves %d bytes, the layout needs %d", ErrLayout, addr, n.size, need)
		}
	}
	db.fab = &fabric{db: db, cq: db.cq, poll: cfg.Poll}
	db.iss = db.fab
	db.fab.start()
	if cfg.Smart != nil {
		if db.sdtx, err = newSmartIssuer(ctx, db, db.fab); err != nil {
			return nil, err
		}
		db.iss = db.sdtx
	}
	if db.setup, err = db.newCoord(-1, 0); err != nil {
		return nil, err
	}
	if err := db.format(ctx); err != nil {
		return nil, err
	}
	if len(cfg.Members) > 0 {
		db.kick = make(chan struct{}, 1)
		db.rctx, db.rcancel = context.WithCancel(context.Background())
		db.rwg.Add(1)
		go db.renew()
	}
	return db, nil
}

// live reports whether node n may be used under v: in it, and connected.
func (db *DB) live(v *view, n int) bool { return !v.out(n) && db.nodes[n] != nil }

// format writes the layout's fingerprint into every node's header that
// has none, and checks the others'.
func (db *DB) format(ctx context.Context) error {
	c, fp := db.setup, db.lay.fingerprint(db.n)
	c.v = db.view.Load()
	var b byNode
	for i := range db.nodes {
		if db.live(c.v, i) {
			b.add(i, c.cas(i, 0, db.arena.results+8*i, 0, fp))
		}
	}
	if err := db.iss.round(ctx, c, b.lists); err != nil {
		return err
	}
	for i, n := range db.nodes {
		if !db.live(c.v, i) {
			continue
		}
		if old := c.word(db.arena.results + 8*i); old != 0 && old != fp {
			return fmt.Errorf("%w: node %s holds another database's layout", ErrLayout, n.addr)
		}
	}
	return nil
}

// remote is the address of offset off of node n's region (0 for a node
// not connected: the round fails at the post).
func (db *DB) remote(n int, off int64) uint64 {
	if db.nodes[n] == nil {
		return 0
	}
	return db.nodes[n].base + uint64(off)
}

// rkey is node n's region key.
func (db *DB) rkey(n int) uint32 {
	if db.nodes[n] == nil {
		return 0
	}
	return db.nodes[n].key
}

// coordAt is the coordinator of index i (the poller's routing).
func (db *DB) coordAt(i int) *coord {
	if i >= len(db.coords) {
		return nil
	}
	return db.coords[i].Load()
}

// Begin implements txn.DB.
func (db *DB) Begin(ctx context.Context) (txn.Tx, error) {
	if db.closed.Load() {
		return nil, txn.ErrClosed
	}
	v, err := db.current(ctx)
	if err != nil {
		return nil, err
	}
	c, err := db.takeCoord(ctx)
	if err != nil {
		return nil, err
	}
	c.v = v
	if err := db.iss.begin(ctx, c); err != nil {
		db.putCoord(c)
		return nil, err
	}
	t := &Tx{db: db, ctx: ctx, c: c, recs: map[string]*rec{}}
	db.cmu.Lock()
	db.open[t] = struct{}{}
	db.cmu.Unlock()
	return t, nil
}

// takeCoord hands out a free coordinator, claiming a new one when none
// is free (at most MaxTx at once).
func (db *DB) takeCoord(ctx context.Context) (*coord, error) {
	select {
	case db.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, txn.Abort(txn.Timeout, nil, ctx.Err())
	}
	db.cmu.Lock()
	if n := len(db.free); n > 0 {
		c := db.free[n-1]
		db.free = db.free[:n-1]
		db.cmu.Unlock()
		return c, nil
	}
	db.ncoord++
	idx := db.ncoord
	db.cmu.Unlock()
	c, err := db.claim(ctx, idx)
	if err != nil {
		<-db.sem
		return nil, err
	}
	return c, nil
}

// putCoord gives a coordinator back; a broken one (lists it could not
// wait out, a stopped commit) is never used again.
func (db *DB) putCoord(c *coord) {
	db.cmu.Lock()
	if !c.broken {
		db.free = append(db.free, c)
	}
	db.cmu.Unlock()
	<-db.sem
}

// claim claims a coordinator id (and its log area) on some node by a CAS
// of its claim word, for coordinator index idx.
func (db *DB) claim(ctx context.Context, idx int) (*coord, error) {
	db.smu.Lock()
	defer db.smu.Unlock()
	v := db.view.Load()
	db.setup.v = v
	nodes := db.n
	start := rand.N(nodes)
	var unreachable error
	for k := range nodes {
		n := (start + k) % nodes
		if !db.live(v, n) {
			continue
		}
		c, err := db.claimOn(ctx, db.setup, idx, n, rand.N(db.lay.Coordinators))
		if err != nil && errors.Is(err, txn.ErrUnreachable) && len(db.cfg.Members) > 0 {
			unreachable = err // a node not out yet: claim on another
			continue
		}
		if err != nil || c != nil {
			return c, err
		}
	}
	if unreachable != nil {
		return nil, txn.Abort(txn.Timeout, nil, unreachable)
	}
	return nil, fmt.Errorf("%w: no free coordinator id on any node", txn.ErrFull)
}

// claimOn tries the claim words of node n from i0 on; nil when all are
// taken.
func (db *DB) claimOn(ctx context.Context, s *coord, idx, n, i0 int) (*coord, error) {
	per := db.lay.Coordinators
	for k := range per {
		i := (i0 + k) % per
		err := db.iss.round(ctx, s, []list{{node: n, wrs: []verbs.SendWR{s.cas(n, offClaims+int64(8*i), db.arena.results, 0, db.nonce)}}})
		if err != nil {
			return nil, err
		}
		if s.word(db.arena.results) == 0 {
			return db.newCoord(idx, n*per+i)
		}
	}
	return nil, nil
}

// Close releases the client: transactions open abort (their locks
// released), the coordinators' logs are truncated and their ids freed,
// the connections closed. Transactions under way fail.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return nil
	}
	db.cmu.Lock()
	open := make([]*Tx, 0, len(db.open))
	for t := range db.open {
		open = append(open, t)
	}
	db.cmu.Unlock()
	for _, t := range open {
		t.closeAbort()
	}
	db.life.Lock()
	defer db.life.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	db.cmu.Lock()
	free := db.free
	db.free = nil
	db.cmu.Unlock()
	if db.recov != nil {
		free = append(free, db.recov)
	}
	v := db.view.Load()
	for _, c := range free {
		c.v = v
	}
	var wg sync.WaitGroup
	for _, c := range free {
		wg.Go(func() { db.release(ctx, c) })
	}
	wg.Wait()
	db.teardown()
	return nil
}

// release truncates c's log and frees its id.
func (db *DB) release(ctx context.Context, c *coord) {
	a := &db.arena
	binary.LittleEndian.PutUint64(c.buf[a.results:], 0)
	var b byNode
	for _, l := range db.logCopies(c.v, c.id) {
		b.add(l.node, c.write(l.node, l.off, a.zero, 8))
	}
	if db.live(c.v, c.logNode) {
		b.add(c.logNode, c.cas(c.logNode, offClaims+int64(8*(c.id%db.lay.Coordinators)), a.results, db.nonce, 0))
	}
	_ = db.iss.round(ctx, c, b.lists)
}

// teardown closes what Dial opened.
func (db *DB) teardown() {
	if db.rcancel != nil {
		db.rcancel()
		db.rwg.Wait()
	}
	for _, n := range db.nodes {
		if n != nil {
			n.conn.Close()
		}
	}
	if db.fab != nil {
		db.fab.stop()
	}
	if db.sdtx != nil {
		db.sdtx.close()
	}
	for i := range db.coords {
		if c := db.coords[i].Load(); c != nil && c.mr != nil {
			c.mr.Deregister()
		}
	}
	if db.cq != nil {
		db.cq.Destroy()
	}
	if db.pd != nil {
		db.pd.Dealloc()
	}
	if db.ownDev {
		db.dev.Close()
	}
}
