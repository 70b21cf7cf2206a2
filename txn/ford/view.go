package ford

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/txn"
	"github.com/rdmakit/rdmakit/txn/internal/membership"
)

// A view is what a client routes by: a configuration (an epoch, which
// node holds which copy of each shard, the nodes out) and the times it
// may be used between. Without membership (Config.Members empty) it is
// the layout's placement, forever. With it, the configuration comes from
// a query of the membership (config.go) and is leased (doc.go, Failover):
// a transaction may begin and take its first lock only before until, and
// post nothing after until + Lease − Margin; a configuration of a new
// epoch is used only from active on, when every transaction of the epochs
// before has ended or its lease is over.
type view struct {
	conf   membership.Configuration
	until  time.Time // the lease on conf ends (zero: never)
	active time.Time // conf may be used from then on
}

// ErrStale: the client's lease on its configuration is over and no
// member of the membership renewed it (the client may be cut from the
// nodes): a transaction may not begin, lock or read under it. An abort
// (txn.Timeout): txn.Run tries again, with a renewed lease.
var ErrStale = errors.New("ford: the configuration's lease is over")

// staticView is the layout's placement on nodes nodes, never out of date.
func staticView(nodes, f int) *view {
	return &view{conf: membership.Initial(nodes, f)}
}

// replicas are the nodes holding shard s in v, the primary first.
func (v *view) replicas(s int) []int { return v.conf.Replicas(s) }

// primary is the node holding shard s's primary copy in v.
func (v *view) primary(s int) int { return v.conf.Primaries[s] }

// out reports whether node n is out of v.
func (v *view) out(n int) bool { return v.conf.Out[n] }

// leased is nil while a transaction may begin or take its first lock
// under v, else a Timeout abort wrapping ErrStale.
func (v *view) leased(now time.Time) error {
	if !v.until.IsZero() && !now.Before(v.until) {
		return txn.Abort(txn.Timeout, nil, fmt.Errorf("%w: epoch %d, since %v", ErrStale, v.conf.Epoch, v.until))
	}
	return nil
}

// posting is nil while a transaction under v may post requests: until
// the lease's end plus lease − margin (a transaction that began under
// the lease ends by then; the next epoch waits that long, and more).
func (v *view) posting(now time.Time, lease, margin time.Duration) error {
	if !v.until.IsZero() && !now.Before(v.until.Add(lease-margin)) {
		return txn.Abort(txn.Timeout, nil, fmt.Errorf("%w: epoch %d, posting since %v", ErrStale, v.conf.Epoch, v.until.Add(lease-margin)))
	}
	return nil
}

// posting is nil while t may post requests under its view.
func (t *Tx) posting() error {
	return t.c.v.posting(now(), t.db.cfg.Lease, t.db.cfg.Margin)
}
