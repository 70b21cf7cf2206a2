package nic

import "github.com/rdmakit/rdmakit/verbs"

// Observer learns of a node's memory regions and QPs as they change, so a
// transport can publish them to initiators in other processes (the shm
// transport's region and QP tables). Its methods run on the goroutine that
// makes the change, possibly with node locks held: they must be quick and
// must not call back into the node, except for the accessors of the
// region or QP they are given.
type Observer interface {
	// RegionAdded runs once a region is registered, before AllocMR
	// returns it.
	RegionAdded(m *MR)
	// RegionRemoved runs at the start of Deregister, before the region's
	// rkey stops resolving at the node: once it returns, no initiator may
	// start an operation on the region.
	RegionRemoved(m *MR)
	// QPChanged runs after a QP was created or its state or access flags
	// changed (also when it was destroyed: State is then not a verbs
	// state). Changes may race: an implementation should read the QP's
	// current values under a lock of its own, so that the last call
	// publishes the latest ones.
	QPChanged(q *QP)
}

// Access returns the remote access flags the QP grants as a responder.
func (q *QP) Access() verbs.Access { return verbs.Access(q.resp.access.Load()) }

// PD returns the QP's protection domain.
func (q *QP) PD() *PD { return q.pd }

// Receiving reports whether the QP accepts requests as a responder (RTR
// or RTS).
func (q *QP) Receiving() bool { return receiving(q) }

// published tells the node's observer that the QP changed.
func (q *QP) published() {
	if o := q.node.obs; o != nil {
		o.QPChanged(q)
	}
}
