package prismtx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/verbs"
)

// Config says how to reach the shards and how the client behaves.
type Config struct {
	// Nodes are the memory nodes' cm addresses (host:port), one shard
	// each, in shard order: key k lives on Nodes[txn.Shard(k, len(Nodes))].
	// Every client must list them in the same order.
	Nodes []string
	// Device is the URI of the client's own device, opened by Dial; Dev,
	// when not nil, is a device to use instead (not closed by the DB).
	Device string
	Dev    verbs.Device
	// Token is the nodes' auth token.
	Token string
	// Slots is the number of chains in flight per node (default 128).
	Slots int
	// Lease is how long a prepared timestamp may stay unresolved before
	// any client may resolve it (default DefaultLease, at most MaxLease):
	// with the resolution's round trips, the longest a client that died
	// mid-commit blocks a key.
	Lease time.Duration
	// ReadSize is how many bytes a GET reads through a slot's pointer
	// before it knows the version's length (default 512); a longer
	// version costs a second READ, of its exact length, and the DB then
	// reads that key with its length.
	ReadSize int
	// SyncInstall makes Commit wait for the installation of the writes
	// on nodes other than the decision's (one more round trip) instead
	// of returning once the transaction is decided and leaving them to
	// the background.
	SyncInstall bool
	// SkipValidation turns validation off: no read validation, and write
	// validation only locks (the negative control of the serializability
	// checker: write skew then commits). Never for real use.
	SkipValidation bool
	// Poll is how the connections' pollers wait (default adaptive).
	Poll verbs.PollPolicy
}

// Leases of prepared timestamps. The default leaves a waiter the time
// to resolve a dead client's timestamp within a second of its prepare
// (TestTxnKilledClients measured 1.01 s with a 1 s lease).
const (
	DefaultLease = 800 * time.Millisecond
	MaxLease     = time.Second
)

func (c *Config) defaults() {
	if c.Slots <= 0 {
		c.Slots = 128
	}
	c.Slots = min(c.Slots, int(verbs.LowMask)-1)
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	c.Lease = min(c.Lease, MaxLease)
	if c.ReadSize <= 0 {
		c.ReadSize = 512
	}
	c.ReadSize = min(max(c.ReadSize, itemHead+8), maxItem)
}

// DB is a PRISM-TX client: it implements txn.DB. Safe for concurrent
// use.
type DB struct {
	cfg    Config
	dev    verbs.Device
	ownDev bool
	pd     verbs.PD
	conns  []*conn

	keys sync.Map       // string → *keyInfo
	acq  sync.Mutex     // one phase acquires its slots at a time (phase.go)
	bg   sync.WaitGroup // installations in the background

	idmu   sync.Mutex
	idFree [][]*clientID // claimed ids with nothing unresolved, by id mod nodes

	closed atomic.Bool
	life   sync.RWMutex

	stats counters
}

var _ txn.DB = (*DB)(nil)

// keyInfo is what the DB learned about a key: its slot, and the length of
// its last version read.
type keyInfo struct {
	slot int
	size atomic.Int32
	c    atomic.Uint64 // the C last seen: a blind write's guess
}

// clientID is one claimed client id: a transaction holds it from its
// timestamp to its end, so an id has at most one transaction in flight.
type clientID struct {
	id   uint16
	last uint64 // the id's latest timestamp
}

// Dial connects to every node.
func Dial(ctx context.Context, cfg Config) (_ *DB, err error) {
	cfg.defaults()
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", verbs.ErrInvalidArg)
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
	db := &DB{cfg: cfg, dev: dev, ownDev: own, pd: pd, idFree: make([][]*clientID, len(cfg.Nodes))}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	for i, addr := range cfg.Nodes {
		c, err := dial(ctx, dev, pd, i, addr, cfg.Token, cfg.Slots, cfg.Poll)
		if err != nil {
			return nil, err
		}
		db.conns = append(db.conns, c)
	}
	return db, nil
}

// Begin implements txn.DB.
func (db *DB) Begin(ctx context.Context) (txn.Tx, error) {
	if db.closed.Load() {
		return nil, txn.ErrClosed
	}
	return &Tx{db: db, ctx: ctx, reads: map[string]*readEntry{}, writes: map[string]*writeEntry{}}, nil
}

// shard is key's node.
func (db *DB) shard(key []byte) *conn { return db.conns[txn.Shard(key, len(db.conns))] }

// home is key's home slot in its shard.
func (db *DB) home(key []byte, c *conn) int {
	return int(txn.Hash(key) / uint64(len(db.conns)) % uint64(c.lay.Slots))
}

// takeID hands out a claimed id whose decision record is on node
// coord (id mod nodes = coord), claiming a new one when none is free.
func (db *DB) takeID(ctx context.Context, coord int) (*clientID, error) {
	db.idmu.Lock()
	if free := db.idFree[coord]; len(free) > 0 {
		id := free[len(free)-1]
		db.idFree[coord] = free[:len(free)-1]
		db.idmu.Unlock()
		return id, nil
	}
	db.idmu.Unlock()
	return db.claim(ctx, coord)
}

// putID gives an id back; clean says none of its transactions is left
// unresolved. An id that is not clean is burned: never used again by this
// DB nor, once its connections end, by anyone (the nodes refuse it), so
// its decision record keeps its last verdict for those who resolve its
// prepared timestamps.
func (db *DB) putID(id *clientID, clean bool) {
	if !clean {
		db.stats.burned.Add(1)
		return
	}
	coord := int(id.id) % len(db.conns)
	db.idmu.Lock()
	db.idFree[coord] = append(db.idFree[coord], id)
	db.idmu.Unlock()
}

// claim claims a random client id (≡ coord mod nodes) at every node: all
// must grant it, so two live clients never share one.
func (db *DB) claim(ctx context.Context, coord int) (*clientID, error) {
	var req [2]byte
	n := len(db.conns)
	for range 64 {
		id := uint16(n*rand.N((maxClients-1)/n) + coord)
		if id == 0 {
			id = uint16(n)
		}
		binary.LittleEndian.PutUint16(req[:], id)
		granted := 0
		var err error
		for _, c := range db.conns {
			if _, err = c.call(ctx, MethodClaim, req[:]); err != nil {
				break
			}
			granted++
		}
		if err == nil {
			return &clientID{id: id}, nil
		}
		for _, c := range db.conns[:granted] {
			c.call(ctx, MethodRelease, req[:]) // best effort: a failed release burns the id
		}
		if !errors.Is(err, ErrIDTaken) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: no free client id after 64 tries", txn.ErrFull)
}

// Close releases the clean ids and closes the connections. Transactions
// under way fail.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return nil
	}
	db.life.Lock() // no commit is under way
	defer db.life.Unlock()
	db.bg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var req [2]byte
	db.idmu.Lock()
	for _, free := range db.idFree {
		for _, id := range free {
			binary.LittleEndian.PutUint16(req[:], id.id)
			for _, c := range db.conns {
				c.call(ctx, MethodRelease, req[:])
			}
		}
	}
	db.idFree = nil
	db.idmu.Unlock()
	for _, c := range db.conns {
		c.close()
	}
	if db.pd != nil {
		db.pd.Dealloc()
	}
	if db.ownDev {
		db.dev.Close()
	}
	return nil
}
