package sockexp

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/peers"
)

// sockperfLabel is sockperf's system column.
const sockperfLabel = "sockperf/tcp"

// sockperf adds sockperf's TCP ping-pong over loopback at every size,
// busy-polling (--nonblocked) and blocking, rounds times each; a quick
// run measures one size busy-polling once. Without sockperf installed
// its rows are left out, the reason in the notes.
func (u *latencyRun) sockperf(ctx context.Context, env *bench.Env) error {
	type variant struct {
		mode string
		busy bool
	}
	variants := []variant{{"busy-poll", true}, {"blocking", false}}
	sizes, rounds := latencySizes, u.rounds
	if env.Quick {
		variants, sizes, rounds = variants[:1], []int{quickSockperfSize}, 1
	}
	for range rounds {
		for _, v := range variants {
			key := [2]string{sockperfLabel, v.mode}
			for _, size := range sizes {
				if size > peers.SockperfMaxMsgSize {
					continue // said in the notes below
				}
				res, err := peers.Sockperf(ctx, peers.SockperfOptions{Duration: u.pointTime, MsgSize: size, BusyPoll: v.busy})
				if errors.Is(err, peers.ErrNotInstalled) {
					u.notes = append(u.notes, fmt.Sprintf("%s: no rows: %v.", sockperfLabel, err))
					return nil
				}
				if err != nil {
					return fmt.Errorf("sockexp: sockperf %s, %d B: %w", v.mode, size, err)
				}
				if u.samples[key] == nil {
					u.order = append(u.order, key)
					u.samples[key] = map[int][]latencySample{}
				}
				u.samples[key][size] = append(u.samples[key][size],
					latencySample{p50: res.RTTP50, p99: res.RTTP99, mean: res.RTTAvg, count: res.Samples})
			}
		}
	}
	u.notes = append(u.notes, "sockperf runs its own client and server (C++, blocking or busy-polling non-blocking sockets: "+
		"`sockperf ping-pong --tcp --full-rtt`, with --nonblocked for busy-poll) for whole seconds of at least the point's time; "+
		"it is the floor of a TCP round trip on this machine.")
	for _, size := range sizes {
		if size > peers.SockperfMaxMsgSize {
			u.notes = append(u.notes, fmt.Sprintf("sockperf has no %d B row: its largest message is %d B.", size, peers.SockperfMaxMsgSize))
		}
	}
	return nil
}
