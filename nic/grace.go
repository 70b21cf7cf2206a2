package nic

import "time"

// SilenceGrace is the rule both remote transports apply in
// Link.Progressed once a link has moved nothing for a whole retry budget:
// the first time it is found silent it gets one budget more (a live peer
// starved of CPU on a loaded machine answers late, not never), and a new
// grace only after a response has arrived since the last one began. So a
// stopped peer is found after about twice the budget, and a peer that
// answers keep-alives but drops requests is not kept alive by them.
// The zero value is ready; the caller serializes calls.
type SilenceGrace struct {
	on    bool
	resps uint64 // the link's response count when the grace began
	at    time.Time
}

// Alive reports whether a link silent for the budget d still counts as
// alive at now, given how many responses it has taken so far (any
// counter that grows with them).
func (g *SilenceGrace) Alive(now time.Time, d time.Duration, resps uint64) bool {
	if !g.on || resps != g.resps {
		g.on, g.resps, g.at = true, resps, now
		return true
	}
	return now.Sub(g.at) < d
}
