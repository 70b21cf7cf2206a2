package ford

import (
	"context"

	"github.com/rdmakit/rdmakit/verbs"
)

// A list is one post list to one memory node: one doorbell. Its work
// requests name local memory in the coordinator's region (coord.mr) and
// remote memory in the node's region.
type list struct {
	node int
	wrs  []verbs.SendWR
}

// issuer is how the protocol's post lists reach the nodes — the one seam
// between FORD's logic and the verbs machinery. Every phase of a
// transaction is one call of round: its lists go out at once and the
// call returns when all have completed, so a round is one round trip
// whatever the number of nodes. The direct issuer (fabric) posts on a QP
// per node and routes completions by wr_id to the coordinator; a
// Smart-DTX issuer posts the same lists through a smart.Task (credits,
// CAS backoff, the coroutine throttle) without any change here.
type issuer interface {
	// round posts lists for coordinator c and waits for all of them.
	// An error means a list failed or ctx ended; either way no list of
	// the round is in flight when round returns (c's buffers are free).
	round(ctx context.Context, c *coord, lists []list) error
	// post posts lists for c and does not wait (a lazy log truncation):
	// later rounds of c go after them on the same QPs.
	post(c *coord, lists []list) error
	// begin is called when a transaction takes coordinator c, end when
	// it gives it back (committed or not): where Smart-DTX enters and leaves a task on a
	// worker (the coroutine throttle bounds the transactions under way).
	begin(ctx context.Context, c *coord) error
	end(c *coord, committed bool)
	// conflict is called when a lock round found a record locked by a
	// live owner, for the k-th time (from 1) in this transaction, and a
	// wait may pay (Tx.waitable): true runs the lock round again (after
	// the issuer's backoff), false aborts the transaction
	// (LockConflict). FORD aborts at once; Smart-DTX backs off
	// (smart.Task.Backoff) and retries.
	conflict(c *coord, k int) bool
}

// wr helpers: the work requests FORD posts. The SGE lists live in the
// coordinator's sge pool, so a round allocates nothing per request but
// its list slices.

// read is a READ of n bytes at remote offset off of node into the
// coordinator's buffer at local offset loc.
func (c *coord) read(node int, off int64, loc, n int) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpRead, SGL: c.sge(loc, n), RemoteAddr: c.db.remote(node, off), RKey: c.db.rkey(node)}
}

// write is a WRITE of n bytes of the buffer at loc to remote offset off.
func (c *coord) write(node int, off int64, loc, n int) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpWrite, SGL: c.sge(loc, n), RemoteAddr: c.db.remote(node, off), RKey: c.db.rkey(node)}
}

// cas is an 8-byte compare-and-swap at remote offset off, the old value
// landing at loc.
func (c *coord) cas(node int, off int64, loc int, compare, swap uint64) verbs.SendWR {
	w := verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: c.sge(loc, 8), RemoteAddr: c.db.remote(node, off), RKey: c.db.rkey(node)}
	w.Atomic.Compare[0], w.Atomic.Swap[0] = compare, swap
	return w
}

// sge is a one-entry scatter list of n bytes of the buffer at loc.
func (c *coord) sge(loc, n int) []verbs.SGE {
	return []verbs.SGE{{Addr: c.mr.Addr() + uint64(loc), Length: uint32(n), LKey: c.mr.LKey()}}
}

// byNode groups requests into one list per node, in node order of first
// appearance.
type byNode struct {
	lists []list
	at    map[int]int
}

func (b *byNode) add(node int, wrs ...verbs.SendWR) {
	if b.at == nil {
		b.at = map[int]int{}
	}
	i, ok := b.at[node]
	if !ok {
		i = len(b.lists)
		b.at[node] = i
		b.lists = append(b.lists, list{node: node})
	}
	b.lists[i].wrs = append(b.lists[i].wrs, wrs...)
}
