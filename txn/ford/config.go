package ford

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/internal/membership"
)

// The client's side of the membership: it queries a member (a
// linearizable read of the configuration), holds the answer under a
// lease of ConfigLease from the moment it sent the query, renews it every
// third of that, and routes each transaction by the view it began under
// (view.go). The nodes' parameters come with every answer (params), so
// that every client counts the same leases.

// params are the membership's leases, as the nodes' NodeConfig set them.
type params struct {
	configLease time.Duration // a client's lease on a configuration
	lease       time.Duration // the longest lock lease a client may use
	skew        time.Duration // the bound on clock differences
}

// hold is how long after a member applied a new epoch clients wait
// before they use it: every lease on the epoch before (taken before the
// change committed) is over, every transaction under one has posted its
// last request, and its locks are expired by any client's clock.
func (p params) hold() time.Duration { return p.configLease + p.lease + 2*p.skew }

func (p params) marshal() []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(p.configLease))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.lease))
	return binary.LittleEndian.AppendUint64(b, uint64(p.skew))
}

func unmarshalParams(b []byte) (params, error) {
	if len(b) != 24 {
		return params{}, fmt.Errorf("%w: %d bytes of membership parameters", membership.ErrProtocol, len(b))
	}
	p := params{time.Duration(binary.LittleEndian.Uint64(b)), time.Duration(binary.LittleEndian.Uint64(b[8:])),
		time.Duration(binary.LittleEndian.Uint64(b[16:]))}
	if p.configLease <= 0 || p.lease <= 0 || p.lease > MaxLease || p.skew < 0 || p.configLease > time.Minute {
		return params{}, fmt.Errorf("%w: membership parameters %+v", membership.ErrProtocol, p)
	}
	return p, nil
}

// queryTimeout bounds one member's answer.
const queryTimeout = 2 * time.Second

// learn queries the members in turn, from the one that answered last,
// and installs the view the first answer gives. A client that cannot
// reach any keeps its view, whose lease runs out.
func (db *DB) learn(ctx context.Context) error {
	db.qmu.Lock()
	defer db.qmu.Unlock()
	var last error
	for k := range db.cfg.Members {
		i := (db.lastMember + k) % len(db.cfg.Members)
		sent := time.Now()
		one, cancel := context.WithTimeout(ctx, queryTimeout)
		ans, err := membership.Query(one, db.cfg.Members[i], db.cfg.Token)
		cancel()
		if err == nil {
			err = db.install(ans, sent)
		}
		if err == nil {
			db.lastMember = i
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = err
	}
	return fmt.Errorf("%w: no member of the membership answered (%w)", txn.ErrUnreachable, last)
}

// install takes a member's answer to a query sent at sent.
func (db *DB) install(ans membership.Answer, sent time.Time) error {
	p, err := unmarshalParams(ans.Params)
	if err != nil {
		return err
	}
	if len(ans.Out) != db.n {
		return fmt.Errorf("%w: a configuration of %d nodes for %d", ErrLayout, len(ans.Out), db.n)
	}
	for sh := range ans.Primaries {
		for _, n := range ans.Replicas(sh) {
			if db.lay.copyIndex(n, sh, db.n) < 0 {
				return fmt.Errorf("%w: a configuration placing shard %d on node %d, which holds no copy of it", ErrLayout, sh, n)
			}
		}
	}
	old := db.view.Load()
	if old != nil && ans.Epoch < old.conf.Epoch {
		return nil // a member behind another: the newer stands
	}
	if old == nil {
		db.params = p // fixed from Dial on: every node sets the same
	} else if p != db.params {
		return fmt.Errorf("%w: membership parameters %+v, then %+v", ErrLayout, db.params, p)
	}
	v := &view{conf: ans.Configuration, until: sent.Add(p.configLease)}
	switch {
	case old != nil && old.conf.Epoch == ans.Epoch:
		v.active = old.active
	case ans.Epoch > 1:
		v.active = time.Now().Add(max(0, p.hold()-ans.Age))
	}
	if old != nil && old.conf.Epoch < ans.Epoch {
		db.log.Warn("ford: a new configuration", "epoch", ans.Epoch, "primaries", ans.Primaries, "out", ans.Out,
			"active in", time.Until(v.active).Round(time.Millisecond))
	}
	db.view.Store(v)
	return nil
}

// renew keeps the view's lease: a query every third of the lease, or at
// once when kicked (a round found a node unreachable).
func (db *DB) renew() {
	defer db.rwg.Done()
	every := db.params.configLease / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-db.rctx.Done():
			return
		case <-t.C:
		case <-db.kick:
		}
		if !db.frozen.Load() {
			_ = db.learn(db.rctx)
		}
		t.Reset(db.params.configLease / 3)
	}
}

// current returns the view to begin a transaction under: once its lease
// is renewed if it is over, and once it is active.
func (db *DB) current(ctx context.Context) (*view, error) {
	v := db.view.Load()
	if v.leased(now()) != nil && len(db.cfg.Members) > 0 && !db.frozen.Load() {
		if err := db.learn(ctx); err != nil && !errors.Is(err, txn.ErrUnreachable) {
			return nil, err
		}
		v = db.view.Load()
	}
	if err := v.leased(now()); err != nil {
		return nil, err
	}
	if wait := time.Until(v.active); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, txn.Abort(txn.Timeout, nil, ctx.Err())
		}
	}
	return v, nil
}

// kickRenew asks the renewer for a query now (a node is unreachable:
// the configuration may have moved on).
func (db *DB) kickRenew() {
	if db.kick == nil {
		return
	}
	select {
	case db.kick <- struct{}{}:
	default:
	}
}

// Configuration is a database's membership at one epoch: each shard's
// primary and backups, the nodes out (shared with txn/farm).
type Configuration = membership.Configuration

// Configuration returns the configuration the client routes by.
func (db *DB) Configuration() Configuration { return db.view.Load().conf.Clone() }
