package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/bench/peers"
	"github.com/rdmakit/rdmakit/bench/perf"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	Register(Experiment{
		Name: "transport-latency",
		Description: "tcp and shm transports between two processes: tcp 8 B READ, WRITE, CAS and SEND round trips and READ " +
			"throughput against post-list size, side by side with sockperf TCP ping-pong and ucx_perftest over UCX_TLS=tcp; " +
			"shm 8 B READ, WRITE, CAS latency, SEND one-way and 1 MiB WRITE bandwidth, side by side with ucx_perftest over " +
			"UCX_TLS=posix and a Go memcpy probe",
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

// tlShmMem is the shm node's memory: one region, large enough for the
// 1 MiB WRITE.
const (
	tlShmMem   = "4MiB"
	tlBWSize   = 1 << 20
	tlOpSize   = 8
	tlRecvSize = "64"
)

// Estimated times per ucx_perftest iteration over posix, which size its
// runs to about a point: a get or cswap, a ping-pong round trip.
const (
	tlUCXOpEst        = 40 * time.Nanosecond
	tlUCXPingPongEst  = 400 * time.Nanosecond
	tlUCXMinIters     = 200000
	tlUCXQuickMinIter = 10000
)

var tlColumns = []Column{
	{Name: "system"}, {Name: "op"}, {Name: "test"}, {Name: "post_list"},
	{Name: "rtt_p50", Unit: "µs"}, {Name: "rtt_p99", Unit: "µs"},
	{Name: "avg", Unit: "ns"}, {Name: "p50", Unit: "ns"}, {Name: "p99", Unit: "ns"},
	{Name: "rate", Unit: "Mops"}, {Name: "bw", Unit: "GB/s"},
	{Name: "server_cpu", Unit: "µs/op"}, {Name: "vs_sockperf", Unit: "×"},
	{Name: "ratio", Unit: "×"}, {Name: "ratio_of"},
}

// tlRow is one row of the transport-latency table; nil fields are "not
// applicable".
type tlRow struct {
	system, op, test      string
	list                  int
	rttP50, rttP99        any // µs
	avg, p50, p99         any // ns
	rate, bw, cpu         any
	vsSockperf, ratio, of any
}

func (r *Result) addTL(x tlRow) {
	r.AddRow(x.system, x.op, x.test, x.list, x.rttP50, x.rttP99, x.avg, x.p50, x.p99,
		x.rate, x.bw, x.cpu, x.vsSockperf, x.ratio, x.of)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func ns(d time.Duration) float64 { return float64(d) }

// quotient is a/b, or nil when either is missing or b is not positive.
func quotient(a, b float64) any {
	if a <= 0 || b <= 0 {
		return nil
	}
	return a / b
}

var tlShmSeq atomic.Int64

// tlShmURI is a shm device URI no other device on this host uses.
func tlShmURI(role string) string {
	return fmt.Sprintf("shm://tl-%d-%s-%d", os.Getpid(), role, tlShmSeq.Add(1))
}

func runTransportLatency(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(tlPoint, tlQuickPoint)
	r := &Result{
		Name:    "transport-latency",
		Title:   "tcp and shm transports between two processes vs sockperf, UCX over loopback TCP and UCX over posix shared memory",
		Columns: tlColumns,
		Plots: []Plot{
			{Title: "8 B READ throughput against post-list size", X: "post_list", Y: "rate", Series: []string{"system"},
				Where: map[string]string{"test": "rate"}, LogX: true, LogY: true},
		},
	}
	shm := slices.Contains(verbs.Providers(), "shm")
	steps, expected := 4+len(tlLists)+3, time.Duration(4+len(tlLists))*point+12*time.Second
	if shm {
		// UCX posix, memcpy, shm latencies (timed and untimed), shm bandwidth.
		steps += 4 + 1 + 4 + 1
		expected += (4 + 1 + 2*4 + 1) * point
	}
	bar := env.Progress(steps, expected, "transport-latency")
	defer bar.Finish()

	if err := tlTCP(ctx, env, r, point, bar); err != nil {
		return nil, err
	}
	r.Meta.Transport = "tcp"
	if shm {
		if err := tlShm(ctx, env, r, point, bar); err != nil {
			return nil, err
		}
		r.Meta.Transport = "tcp, shm"
	} else {
		r.Notes = append(r.Notes, "The shm transport is not registered in this binary: no shared-memory rows in this run.")
	}
	return r, nil
}

// tlTCP adds the tcp rows: round trips and READ throughput against an
// rdmakit node on a tcp device, sockperf and UCX over loopback TCP.
func tlTCP(ctx context.Context, env *Env, r *Result, point time.Duration, bar *Progress) error {
	node, err := startNode(ctx, env, "--mem", "1MiB", "--echo", "--recv", "512", "--probe", "0")
	if err != nil {
		return err
	}
	defer node.stop()

	// Peers first, so the ratio can be filled in as rows are made.
	var sp, spBlock *peers.SockperfResult
	spDur := max(point, time.Second)
	if sp, err = peers.Sockperf(ctx, peers.SockperfOptions{Duration: spDur, BusyPoll: true}); err != nil {
		if !errors.Is(err, peers.ErrNotInstalled) {
			return err
		}
		r.Notes = append(r.Notes, "sockperf is not installed (scripts/install-peers.sh): no TCP floor in this run.")
	}
	bar.Add(1)
	if sp != nil && !env.Quick {
		if spBlock, err = peers.Sockperf(ctx, peers.SockperfOptions{Duration: spDur}); err != nil {
			return err
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
		r.addTL(tlRow{system: "sockperf --nonblocked", op: "ping-pong 14 B", test: "rtt", list: 1,
			rttP50: us(sp.RTTP50), rttP99: us(sp.RTTP99), vsSockperf: 1.0})
	}
	if spBlock != nil {
		r.addTL(tlRow{system: "sockperf (blocking)", op: "ping-pong 14 B", test: "rtt", list: 1,
			rttP50: us(spBlock.RTTP50), rttP99: us(spBlock.RTTP99), vsSockperf: ratio(spBlock.RTTP50)})
	}
	iters := 100000
	if env.Quick {
		iters = 2000
	}
	ux, err := peers.UCXPerftest(ctx, peers.UCXOptions{Test: "ucp_am_lat", TLS: "tcp", Size: 8, Iters: iters})
	switch {
	case errors.Is(err, peers.ErrNotInstalled):
		r.Notes = append(r.Notes, "ucx_perftest is not installed (scripts/install-peers.sh): no UCX rows in this run.")
	case err != nil:
		r.Notes = append(r.Notes, "ucx_perftest ucp_am_lat over tcp failed: "+err.Error())
	default:
		r.addTL(tlRow{system: "ucx_perftest UCX_TLS=tcp", op: "ucp_am_lat 8 B", test: "rtt", list: 1,
			rttP50: us(ux.RTT), vsSockperf: ratio(ux.RTT)})
	}
	bar.Add(1)

	// rdmakit tcp round trips: one operation at a time.
	lat, err := perf.Dial(ctx, perf.Config{Client: "tcp://127.0.0.1:0", Poll: env.Poll, Window: 64}, node.CM, nil)
	if err != nil {
		return err
	}
	for _, op := range []perf.Op{perf.Read, perf.Write, perf.CAS, perf.Send} {
		m, err := lat.Measure(ctx, perf.Cell{Op: op, Test: perf.Lat, Size: 8}, perf.Stop{Duration: point})
		if err != nil {
			lat.Close()
			return err
		}
		p50, p99 := m.Lat.P50, m.Lat.P99
		if op == perf.Send { // perf reports half of the echoed round trip, as ib_send_lat does
			p50, p99 = 2*p50, 2*p99
		}
		r.addTL(tlRow{system: "rdmakit tcp", op: op.String() + " 8 B", test: "rtt", list: 1,
			rttP50: us(p50), rttP99: us(p99), vsSockperf: ratio(p50)})
		bar.Add(1)
	}
	r.Meta.Device = lat.ClientAddress() + " → " + node.Device
	lat.Close()

	// READ throughput against post-list size: 256 outstanding, lists of L
	// with the last signaled; the node's CPU time per operation from /proc.
	for _, l := range tlLists {
		p, err := perf.Dial(ctx, perf.Config{Client: "tcp://127.0.0.1:0", Poll: env.Poll, Window: 256, Batch: l}, node.CM, nil)
		if err != nil {
			return err
		}
		c0, _ := node.cpu()
		m, err := p.Measure(ctx, perf.Cell{Op: perf.Read, Test: perf.BW, Size: 8}, perf.Stop{Duration: point})
		c1, _ := node.cpu()
		p.Close()
		if err != nil {
			return err
		}
		var cpu any
		if m.Iters > 0 && c1 > c0 {
			cpu = us(c1-c0) / float64(m.Iters)
		}
		r.addTL(tlRow{system: "rdmakit tcp", op: "read 8 B", test: "rate", list: l, rate: m.Mops(), cpu: cpu})
		bar.Add(1)
	}
	r.Notes = append(r.Notes,
		"tcp: both ends on this machine over 127.0.0.1; the rdmakit node (the responder) runs in its own process, started as `rdmakit node --echo`.",
		"rtt: one operation at a time, post to polled completion; SEND is an echoed round trip (twice perf's one-way figure).",
		"sockperf --nonblocked spins on non-blocking sockets at both ends (the floor of a TCP round trip here); blocking sockperf sleeps between messages and pays the wake-up of an idle CPU.",
		"ucx_perftest prints half the ping-pong round trip; the UCX_TLS=tcp row shows the full round trip.",
		"rate: 256 READs outstanding, posted in lists of post_list with the last signaled (one write system call per list); server_cpu is the node process's user+system time per operation (/proc, 10 ms ticks), including its polling.",
		fmt.Sprintf("vs_sockperf is the p50 round trip divided by sockperf --nonblocked's p50 in this run; each point ran %v.", point),
	)
	return nil
}

// tlShm adds the shared-memory rows: UCX over UCX_TLS=posix, a Go memcpy
// probe and an rdmakit node on a shm device, with the ratios between them.
func tlShm(ctx context.Context, env *Env, r *Result, point time.Duration, bar *Progress) error {
	// Peers first, so the ratios can be filled in as rows are made.
	minIters := tlUCXMinIters
	if env.Quick {
		minIters = tlUCXQuickMinIter
	}
	ucx := map[string]*peers.UCXResult{}
	missing := false
	for _, t := range []struct {
		test, kind string
		est        time.Duration
	}{
		{"ucp_get", "lat", tlUCXOpEst},
		{"ucp_put_lat", "one-way", tlUCXPingPongEst},
		{"ucp_cswap", "lat", tlUCXOpEst},
		{"ucp_am_lat", "one-way", tlUCXPingPongEst},
	} {
		if missing {
			bar.Add(1)
			continue
		}
		iters := max(minIters, int(point/t.est))
		ux, err := peers.UCXPerftest(ctx, peers.UCXOptions{Test: t.test, TLS: "posix", Size: tlOpSize, Iters: iters,
			Timeout: 30*time.Second + 20*point})
		bar.Add(1)
		switch {
		case errors.Is(err, peers.ErrNotInstalled):
			missing = true
			r.Notes = append(r.Notes, "ucx_perftest is not installed (scripts/install-peers.sh): no UCX_TLS=posix rows and no ratios to UCX in this run.")
			continue
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Notes = append(r.Notes, fmt.Sprintf("ucx_perftest %s over posix failed: %v", t.test, err))
			continue
		}
		ucx[t.test] = ux
		// ucx_perftest's own figures: for gets and compare-and-swaps the
		// whole operation, for the ping-pongs half the round trip.
		r.addTL(tlRow{system: "ucx_perftest UCX_TLS=posix", op: fmt.Sprintf("%s %d B", t.test, tlOpSize), test: t.kind, list: 1,
			avg: ns(ux.LatencyAvg), p50: ns(ux.Latency)})
	}
	ucxNs := func(test string, avg bool) float64 {
		ux := ucx[test]
		switch {
		case ux == nil:
			return 0
		case avg:
			return ns(ux.LatencyAvg)
		}
		return ns(ux.Latency)
	}

	memcpy := MemcpyGBps(ctx, tlBWSize, point)
	r.addTL(tlRow{system: "go copy()", op: "memcpy 1 MiB", test: "bw", list: 1, bw: memcpy})
	bar.Add(1)

	node, err := startNode(ctx, env, "--uri", tlShmURI("node"), "--mem", tlShmMem, "--echo", "--recv", "512",
		"--recv-size", tlRecvSize, "--probe", "0")
	if err != nil {
		return err
	}
	defer node.stop()
	// Single-threaded QP and send CQ (ibverbs' thread domain and
	// single-threaded CQ): ucx_perftest's workers are single-threaded too.
	p, err := perf.Dial(ctx, perf.Config{Client: tlShmURI("client"), Poll: env.Poll, Window: 64, SingleThreaded: true}, node.CM, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	// One 1 MiB WRITE first: the node's fresh region is holes that reads
	// map to the kernel's zero page; this makes the target real memory.
	if _, err := p.Measure(ctx, perf.Cell{Op: perf.Write, Test: perf.BW, Size: tlBWSize}, perf.Stop{Iters: 1}); err != nil {
		return err
	}
	var ratios []string
	for _, op := range []perf.Op{perf.Read, perf.Write, perf.CAS, perf.Send} {
		c := perf.Cell{Op: op, Test: perf.Lat, Size: tlOpSize}
		m, err := p.Measure(ctx, c, perf.Stop{Duration: point})
		if err != nil {
			return err
		}
		a, err := p.MeasureAvg(ctx, c, perf.Stop{Duration: point})
		if err != nil {
			return err
		}
		avg := float64(a.Elapsed) / float64(max(a.Iters, 1))
		test := "lat"
		if op == perf.Send { // perf's SEND figures are half the echoed round trip
			avg /= 2
			test = "one-way"
		}
		row := tlRow{system: "rdmakit shm", op: fmt.Sprintf("%v %d B", op, tlOpSize), test: test, list: 1,
			avg: avg, p50: ns(m.Lat.P50), p99: ns(m.Lat.P99)}
		var peer string
		switch op {
		case perf.Read:
			row.ratio, row.of, peer = quotient(avg, ucxNs("ucp_get", true)), "avg / ucp_get avg", "ucp_get"
		case perf.CAS:
			row.ratio, row.of, peer = quotient(avg, ucxNs("ucp_cswap", true)), "avg / ucp_cswap avg", "ucp_cswap"
		case perf.Send:
			row.ratio, row.of, peer = quotient(ns(m.Lat.P50), ucxNs("ucp_am_lat", false)), "p50 / ucp_am_lat typical", "ucp_am_lat"
		}
		if row.of != nil {
			ratios = append(ratios, tlRatioNote(op.String(), row.of.(string), row.ratio, peer))
		}
		r.addTL(row)
		bar.Add(1)
	}
	m, err := p.Measure(ctx, perf.Cell{Op: perf.Write, Test: perf.BW, Size: tlBWSize}, perf.Stop{Duration: point})
	if err != nil {
		return err
	}
	wr := quotient(m.GBps(), memcpy)
	r.addTL(tlRow{system: "rdmakit shm", op: "write 1 MiB", test: "bw", list: p.Config().Batch,
		rate: m.Mops(), bw: m.GBps(), ratio: wr, of: "bw / memcpy bw"})
	ratios = append(ratios, tlRatioNote("write 1 MiB", "bw / memcpy bw", wr, ""))
	bar.Add(1)
	r.Meta.Device += "; " + p.ClientAddress() + " → " + node.Device

	r.Notes = append(r.Notes,
		"shm: the rdmakit node runs in its own process on a shm:// device (`rdmakit node --uri shm://… --mem "+tlShmMem+" --echo --recv 512 --recv-size "+tlRecvSize+"`); READ, WRITE and CAS run in the initiator's process on the node's mapped memory, SEND is deposited by the sender into the node's published receive queue (direct deposit, docs/shm.md) and echoed by the node the same way.",
		"rdmakit shm client: its QP and CQ are created SingleThreaded (verbs.QPInitAttr and verbs.CQInitAttr, ibverbs' thread domain and IBV_CREATE_CQ_ATTR_SINGLE_THREADED) and its receives are posted only before the first SEND, so the READ, WRITE and CAS rows post and poll without locks; the SEND and 1 MiB WRITE rows poll the CQ locked (it then has receives). ucx_perftest runs one thread per process (-T 1) too.",
		fmt.Sprintf("rdmakit shm lat rows: one %d B operation at a time, post to polled completion. avg is elapsed/operations of a separate run of the same loop without per-operation clock readings (as ucx_perftest averages); p50 and p99 come from the timed run, which reads the clock around every operation. The SEND row is one way: half the echoed round trip.", tlOpSize),
		fmt.Sprintf("ucx_perftest UCX_TLS=posix rows: both ucx_perftest processes on this machine over posix shared memory, sized to about %v each (at least %d iterations); avg is ucx_perftest's overall average (elapsed/iterations) and p50 its typical latency (the median of its last 2048 iterations). ucp_get and ucp_cswap are one blocking operation at a time; ucp_put_lat and ucp_am_lat are ping-pongs, shown one way (half the round trip) as ucx_perftest prints them. ucx_perftest always busy-polls; rdmakit polls with the run's policy (--poll).", point, minIters),
		fmt.Sprintf("go copy(): the built-in copy between two 1 MiB heap buffers (the source written first, so it is not the kernel's zero page), repeated for %v; rdmakit shm write 1 MiB: perf's bandwidth test, %d WRITEs outstanding in lists of %d, each a copy from the client's written payload into the node's mapped region; both in 10⁹ bytes per second. Both are Go's copy of the same 1 MiB, so they take the same memmove path (on amd64 without fast REP MOVS, non-temporal stores from 1 MiB up).", point, p.Config().Window, p.Config().Batch),
		"ratio (ratio_of says which): shm READ and CAS averages over ucp_get's and ucp_cswap's averages, shm SEND one-way p50 over ucp_am_lat's one-way typical, shm 1 MiB WRITE bandwidth over the memcpy probe's. Ratios in this run: "+strings.Join(ratios, "; ")+".",
	)
	return nil
}

// tlRatioNote describes one ratio for the notes, e.g. "read avg /
// ucp_get avg = 1.23×".
func tlRatioNote(what, of string, ratio any, peer string) string {
	if v, ok := ratio.(float64); ok {
		return fmt.Sprintf("%s %s = %.3g×", what, of, v)
	}
	if peer != "" {
		return fmt.Sprintf("%s %s: no %s figure", what, of, peer)
	}
	return fmt.Sprintf("%s %s: not measured", what, of)
}
