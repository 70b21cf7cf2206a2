package nic

import (
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// PD is a protection domain; it implements verbs.PD.
type PD struct {
	node *Node
	id   uint32 // unique in the node: Region.PD of its regions
	mrs  atomic.Int64
	qps  atomic.Int64
	srqs atomic.Int64
	dead atomic.Bool
}

var _ verbs.PD = (*PD)(nil)

// Node returns the PD's node.
func (pd *PD) Node() *Node { return pd.node }

func (pd *PD) usable() error {
	if pd.node.closed.Load() {
		return verbs.ErrClosed
	}
	if pd.dead.Load() {
		return fmt.Errorf("%w: PD deallocated", verbs.ErrInvalidState)
	}
	return nil
}

// AllocMR implements verbs.PD.
func (pd *PD) AllocMR(size int, access verbs.Access) (verbs.MR, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	m, err := allocMR(pd, size, access)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CreateSRQ implements verbs.PD.
func (pd *PD) CreateSRQ(maxWR, maxSGE int) (verbs.SRQ, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	a := pd.node.attr
	if maxWR <= 0 || maxWR > a.MaxQPWR || maxSGE <= 0 || maxSGE > a.MaxSGE {
		return nil, fmt.Errorf("%w: SRQ of %d WRs × %d SGEs (max %d × %d)", verbs.ErrInvalidArg, maxWR, maxSGE, a.MaxQPWR, a.MaxSGE)
	}
	s := &SRQ{pd: pd}
	s.rq.init(maxWR, maxSGE)
	pd.node.publishRecv(&s.rq, pd)
	pd.srqs.Add(1)
	return s, nil
}

// CreateAH implements verbs.PD.
func (pd *PD) CreateAH(address string) (verbs.AH, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	if pd.node.net == nil {
		return nil, fmt.Errorf("%w: node has no network", verbs.ErrInvalidState)
	}
	t, err := pd.node.net.Resolve(address)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", verbs.ErrInvalidArg, err)
	}
	return newAH(pd, t), nil
}

// CreateAHFromWC implements verbs.PD.
func (pd *PD) CreateAHFromWC(wc *verbs.WC) (verbs.AH, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	if pd.node.net == nil {
		return nil, fmt.Errorf("%w: node has no network", verbs.ErrInvalidState)
	}
	t, err := pd.node.net.ResolveID(wc.SrcID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", verbs.ErrInvalidArg, err)
	}
	return newAH(pd, t), nil
}

// Dealloc implements verbs.PD.
func (pd *PD) Dealloc() error {
	if pd.mrs.Load() != 0 || pd.qps.Load() != 0 || pd.srqs.Load() != 0 {
		return fmt.Errorf("%w: PD still has %d MRs, %d QPs, %d SRQs", verbs.ErrBusy, pd.mrs.Load(), pd.qps.Load(), pd.srqs.Load())
	}
	if !pd.dead.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: PD already deallocated", verbs.ErrInvalidState)
	}
	pd.node.mu.Lock()
	delete(pd.node.pds, pd)
	pd.node.mu.Unlock()
	return nil
}

// AH is an address handle; it implements verbs.AH.
type AH struct {
	pd   *PD
	dest Target
	node *Node // dest when it is in this process
	link Link  // dest when it is in another process
}

func newAH(pd *PD, t Target) *AH {
	a := &AH{pd: pd, dest: t}
	switch d := t.(type) {
	case *Node:
		a.node = d
	case Link:
		a.link = d
	}
	return a
}

// Address implements verbs.AH.
func (a *AH) Address() string { return a.dest.Address() }
