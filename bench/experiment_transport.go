package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/bench/perf"
)

func init() {
	Register(Experiment{
		Name: "transport-latency",
		Description: "tcp transport between two processes: 8 B READ, WRITE, CAS and SEND round trips and READ throughput " +
			"against post-list size, side by side with sockperf TCP ping-pong and ucx_perftest over UCX_TLS=tcp",
		Run: runTransportLatency,
	})
}

// Durations of the transport-latency experiment.
const (
	tlPoint      = 2 * time.Second
	tlQuickPoint = 150 * time.Millisecond
)

// tlLists are the post-list sizes of the throughput sweep.
var tlLists = []int{1, 4, 16, 64}

var tlColumns = []Column{
	{Name: "system"}, {Name: "op"}, {Name: "test"}, {Name: "post_list"},
	{Name: "rtt_p50", Unit: "µs"}, {Name: "rtt_p99", Unit: "µs"}, {Name: "rate", Unit: "Mops"},
	{Name: "server_cpu", Unit: "µs/op"}, {Name: "vs_sockperf", Unit: "×"},
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func runTransportLatency(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(tlPoint, tlQuickPoint)
	r := &Result{
		Name:    "transport-latency",
		Title:   "tcp soft NIC between two processes vs sockperf and UCX over loopback TCP",
		Columns: tlColumns,
		Plots: []Plot{
			{Title: "8 B READ throughput against post-list size", X: "post_list", Y: "rate", Series: []string{"system"},
				Where: map[string]string{"test": "rate"}, LogX: true, LogY: true},
		},
	}
	node, err := startNode(ctx, env, "--mem", "1MiB", "--echo", "--recv", "512", "--probe", "0")
	if err != nil {
		return nil, err
	}
	defer node.stop()
	bar := env.Progress(4+len(tlLists)+3, time.Duration(4+len(tlLists))*point+12*time.Second, "transport-latency")
	defer bar.Finish()

	// Peers first, so the ratio can be filled in as rows are made.
	var sp, spBlock *peers.SockperfResult
	spDur := max(point, time.Second)
	if sp, err = peers.Sockperf(ctx, peers.SockperfOptions{Duration: spDur, BusyPoll: true}); err != nil {
		if !errors.Is(err, peers.ErrNotInstalled) {
			return nil, err
		}
		r.Notes = append(r.Notes, "sockperf is not installed (scripts/install-peers.sh): no TCP floor in this run.")
	}
	bar.Add(1)
	if sp != nil && !env.Quick {
		if spBlock, err = peers.Sockperf(ctx, peers.SockperfOptions{Duration: spDur}); err != nil {
			return nil, err
		}
	}
	bar.Add(1)
	ratio := func(p50 time.Duration) any {
		if sp == nil || sp.RTTP50 == 0 {
			return nil
		}
		return float64(p50) / float64(sp.RTTP50)
	}
	if sp != nil {
		r.AddRow("sockperf --nonblocked", "ping-pong 14 B", "rtt", 1, us(sp.RTTP50), us(sp.RTTP99), nil, nil, 1.0)
	}
	if spBlock != nil {
		r.AddRow("sockperf (blocking)", "ping-pong 14 B", "rtt", 1, us(spBlock.RTTP50), us(spBlock.RTTP99), nil, nil, ratio(spBlock.RTTP50))
	}
	iters := 100000
	if env.Quick {
		iters = 2000
	}
	ux, err := peers.UCXPerftest(ctx, peers.UCXOptions{Test: "ucp_am_lat", TLS: "tcp", Size: 8, Iters: iters})
	switch {
	case errors.Is(err, peers.ErrNotInstalled):
		r.Notes = append(r.Notes, "ucx_perftest is not installed (scripts/install-peers.sh): no UCX row in this run.")
	case err != nil:
		r.Notes = append(r.Notes, "ucx_perftest ucp_am_lat over tcp failed: "+err.Error())
	default:
		r.AddRow("ucx_perftest UCX_TLS=tcp", "ucp_am_lat 8 B", "rtt", 1, us(ux.RTT), nil, nil, nil, ratio(ux.RTT))
	}
	bar.Add(1)

	// rdmakit tcp round trips: one operation at a time.
	lat, err := perf.Dial(ctx, perf.Config{Client: "tcp://127.0.0.1:0", Poll: env.Poll, Window: 64}, node.CM, nil)
	if err != nil {
		return nil, err
	}
	for _, op := range []perf.Op{perf.Read, perf.Write, perf.CAS, perf.Send} {
		m, err := lat.Measure(ctx, perf.Cell{Op: op, Test: perf.Lat, Size: 8}, perf.Stop{Duration: point})
		if err != nil {
			lat.Close()
			return nil, err
		}
		p50, p99 := m.Lat.P50, m.Lat.P99
		if op == perf.Send { // perf reports half of the echoed round trip, as ib_send_lat does
			p50, p99 = 2*p50, 2*p99
		}
		r.AddRow("rdmakit tcp", op.String()+" 8 B", "rtt", 1, us(p50), us(p99), nil, nil, ratio(p50))
		bar.Add(1)
	}
	r.Meta.Device = lat.ClientAddress() + " → " + node.Device
	lat.Close()

	// READ throughput against post-list size: 256 outstanding, lists of L
	// with the last signaled; the node's CPU time per operation from /proc.
	for _, l := range tlLists {
		p, err := perf.Dial(ctx, perf.Config{Client: "tcp://127.0.0.1:0", Poll: env.Poll, Window: 256, Batch: l}, node.CM, nil)
		if err != nil {
			return nil, err
		}
		c0, _ := node.cpu()
		m, err := p.Measure(ctx, perf.Cell{Op: perf.Read, Test: perf.BW, Size: 8}, perf.Stop{Duration: point})
		c1, _ := node.cpu()
		p.Close()
		if err != nil {
			return nil, err
		}
		var cpu any
		if m.Iters > 0 && c1 > c0 {
			cpu = us(c1-c0) / float64(m.Iters)
		}
		r.AddRow("rdmakit tcp", "read 8 B", "rate", l, nil, nil, m.Mops(), cpu, nil)
		bar.Add(1)
	}
	r.Meta.Transport = "tcp"
	r.Notes = append(r.Notes,
		"Both ends on this machine over 127.0.0.1; the rdmakit node (the responder) runs in its own process, started as `rdmakit node --echo`.",
		"rtt: one operation at a time, post to polled completion; SEND is an echoed round trip (twice perf's one-way figure).",
		"sockperf --nonblocked spins on non-blocking sockets at both ends (the floor of a TCP round trip here); blocking sockperf sleeps between messages and pays the wake-up of an idle CPU.",
		"ucx_perftest prints half the ping-pong round trip; the row shows the full round trip.",
		"rate: 256 READs outstanding, posted in lists of post_list with the last signaled (one write system call per list); server_cpu is the node process's user+system time per operation (/proc, 10 ms ticks), including its polling.",
		fmt.Sprintf("vs_sockperf is the p50 round trip divided by sockperf --nonblocked's p50 in this run; each point ran %v.", point),
	)
	return r, nil
}
