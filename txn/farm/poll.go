package farm

import (
	"context"
	"runtime"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// poll is the node's CPU taking log records: every open ring, in turn,
// until the node closes; idle, it backs off (idler).
func (n *Node) poll() {
	defer n.wg.Done()
	idle := idler{max: n.cfg.PollIdle}
	for n.ctx.Err() == nil {
		t0 := time.Now()
		n.mu.Lock()
		took := 0
		for s := range n.sessions {
			took += n.takeRecords(s)
		}
		n.mu.Unlock()
		if took > 0 {
			n.busy(t0)
			idle.reset()
			continue
		}
		idle.wait(n.ctx)
	}
}

// leases recovers the transactions whose locks are older than the lease
// and those whose COMMIT-BACKUP records came through a connection that
// ended more than a lease ago (or that waited stuckLeases for their
// truncation), and forgets applied transactions after Remember, four
// times a lease.
func (n *Node) leases() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Lease / 4)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		var late []txKey
		now := time.Now()
		n.mu.Lock()
		for k, r := range n.locks {
			if now.Sub(r.at) > n.cfg.Lease {
				late = append(late, k)
			}
		}
		for k, r := range n.pending {
			gone := !r.sess.closed.IsZero() && now.Sub(r.sess.closed) > n.cfg.Lease
			if gone || now.Sub(r.at) > stuckLeases*n.cfg.Lease {
				late = append(late, k)
			}
		}
		n.applied.age(now, n.cfg.Remember)
		n.mu.Unlock()
		for _, k := range late {
			n.startRecovery(k)
		}
	}
}

// stuckLeases is how many leases a COMMIT-BACKUP record waits for its
// truncation, through a connection that lasts, before the node takes its
// coordinator for stuck and recovers the transaction.
const stuckLeases = 4

// busy adds the time since t0 to the node's CPU time.
func (n *Node) busy(t0 time.Time) { n.cpu.Add(int64(time.Since(t0))) }

// verbsError moves a QP to ERROR.
var verbsError = verbs.QPAttr{State: verbs.StateError}

// quiesce waits until every operation on mr that began before the call
// has finished (on providers whose regions can tell).
func quiesce(mr verbs.MR) {
	if q, ok := mr.(verbs.FreeLists); ok {
		q.Quiesce()
	}
}

// idler paces a loop that polls memory: it spins, then yields, then
// sleeps for doubling times up to a bound, so an idle poller costs
// little CPU and never starves another on a small machine.
type idler struct {
	n     int
	max   time.Duration // the longest pause
	timer *time.Timer
}

const (
	idleSpin  = 16
	idleYield = 128
	idleMin   = 2 * time.Microsecond
)

func (d *idler) reset() { d.n = 0 }

func (d *idler) wait(ctx context.Context) {
	d.n++
	switch {
	case d.n < idleSpin:
		return
	case d.n < idleYield:
		runtime.Gosched()
		return
	}
	sleep := min(idleMin<<min(d.n-idleYield, 7), d.max)
	if d.timer == nil {
		d.timer = time.NewTimer(sleep)
	} else {
		d.timer.Reset(sleep)
	}
	select {
	case <-d.timer.C:
	case <-ctx.Done():
		d.timer.Stop()
	}
}

// appliedSet is the transactions a backup applied, in generations of a
// few seconds: forgetting the oldest drops a whole map.
type appliedSet struct {
	gens  [appliedGens]map[txKey]struct{}
	since time.Time // when gens[0] began
}

const appliedGens = 8

// add remembers k.
func (a *appliedSet) add(k txKey) {
	if a.gens[0] == nil {
		a.gens[0] = map[txKey]struct{}{}
	}
	a.gens[0][k] = struct{}{}
}

// has reports whether k is remembered.
func (a *appliedSet) has(k txKey) bool {
	for _, g := range a.gens {
		if _, ok := g[k]; ok {
			return true
		}
	}
	return false
}

// age starts a new generation once the newest is keep/appliedGens old,
// forgetting the oldest: a transaction is remembered for keep at least.
func (a *appliedSet) age(now time.Time, keep time.Duration) {
	if now.Sub(a.since) < keep/(appliedGens-1) {
		return
	}
	copy(a.gens[1:], a.gens[:appliedGens-1])
	a.gens[0], a.since = nil, now
}
