package nic

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// CostModel makes a software node behave like a NIC with finite
// resources, so that effects Smart measures on hardware show in demos and
// experiments: every request the node executes as a responder occupies
// its one execution pipeline for Service, plus Miss when more than
// WQECache requests are waiting for it (the RNIC's small WQE cache,
// re-read over PCIe when it overflows). Requesters in this process
// (loop) then have their requests executed asynchronously, by the QP's
// drain goroutine, so that they pile up as on a NIC; such a request
// waits from its post until its completion is polled (an unsignaled one
// until the next polled completion of its QP). Requests from other
// processes wait while they queue for the pipeline. Off unless set with
// SetCost; experiments that use it say so.
type CostModel struct {
	Service  time.Duration
	WQECache int
	Miss     time.Duration
}

// costState is a node's cost model at run time.
type costState struct {
	model   CostModel
	pipe    sync.Mutex
	waiting atomic.Int64 // requests at the pipeline
	// outstanding counts requests of in-process requesters posted to the
	// node whose completions are not yet polled.
	outstanding atomic.Int64
}

// SetCost turns the cost model on (a zero model turns it off).
func (n *Node) SetCost(c CostModel) {
	if c == (CostModel{}) {
		n.cost.Store(nil)
		return
	}
	n.cost.Store(&costState{model: c})
}

// Cost returns the node's cost model (zero when off).
func (n *Node) Cost() CostModel {
	if c := n.cost.Load(); c != nil {
		return c.model
	}
	return CostModel{}
}

// charge spends one request's service time on the node's pipeline.
func (n *Node) charge() {
	c := n.cost.Load()
	if c == nil {
		return
	}
	q := c.waiting.Add(1)
	if o := c.outstanding.Load(); o > q {
		q = o
	}
	c.pipe.Lock()
	d := c.model.Service
	if c.model.WQECache > 0 && int(q) > c.model.WQECache {
		d += c.model.Miss
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.Gosched()
	}
	c.pipe.Unlock()
	c.waiting.Add(-1)
}
