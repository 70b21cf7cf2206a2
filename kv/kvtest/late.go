package kvtest

import (
	"context"

	"github.com/rdmakit/rdmakit/verbs"
)

// Late waits until cq holds a completion — a connection's first request
// has arrived — and returns a CQ that yields that completion before
// cq's. A test serves a connection on Late's CQ to show that the node's
// receives were posted before anything served it (Bed.Late).
func Late(ctx context.Context, cq verbs.CQ) (verbs.CQ, error) {
	wc := make([]verbs.WC, 16)
	n, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive)
	if err != nil {
		return nil, err
	}
	return &replayCQ{CQ: cq, wc: wc[:n]}, nil
}

// replayCQ returns wc before what its CQ holds.
type replayCQ struct {
	verbs.CQ
	wc []verbs.WC
}

// Poll returns the replayed completions first.
func (r *replayCQ) Poll(wc []verbs.WC) (int, error) {
	if len(r.wc) == 0 {
		return r.CQ.Poll(wc)
	}
	n := copy(wc, r.wc)
	r.wc = r.wc[n:]
	return n, nil
}
