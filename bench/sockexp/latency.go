package sockexp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/stats"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "sock-latency",
		Description: "ping-pong round trips of 64 B to 64 KiB over sock (shm, tcp) next to Go's loopback TCP, " +
			"Unix domain sockets and sockperf: p50, p99, mean",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			return runLatency(ctx, env, netNets(), sockNets())
		},
	})
}

// latencySizes are the message sizes of sock-latency, each way.
var latencySizes = []int{64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10}

// quickSockperfSize is the one size sockperf runs at in a quick run:
// each sockperf run takes 2.5 s more than it measures.
const quickSockperfSize = 64

// fullRounds is how often a full run measures every point; the medians
// of the rounds are reported.
const fullRounds = 3

var latencyColumns = []bench.Column{
	{Name: "system"}, {Name: "mode"}, {Name: "size", Unit: "B"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"}, {Name: "mean", Unit: "µs"},
	{Name: "spread", Unit: "%"}, {Name: "samples"},
	{Name: "vs_tcp", Unit: "×"}, {Name: "vs_uds", Unit: "×"},
}

// latencySample is one round of one system at one size.
type latencySample struct {
	p50, p99, mean time.Duration
	count          int
}

// latencyRun is a sock-latency run: its settings and samples.
type latencyRun struct {
	rounds    int
	pointTime time.Duration
	// order is the rows' systems as (label, mode), in the order run.
	order   [][2]string
	samples map[[2]string]map[int][]latencySample
	notes   []string
}

// roundTripGrace bounds how long a point may run past its time before
// its connection's deadline fails it: a server that hangs fails the run.
const roundTripGrace = 30 * time.Second

// runLatency runs sock-latency over the baselines (and sockperf) and the
// sock systems, one system at a time.
func runLatency(ctx context.Context, env *bench.Env, baselines, socks []network) (*bench.Result, error) {
	all := append(append([]network(nil), baselines...), socks...)
	keep, err := selected(env, append(candidates(all), [2]string{"sockperf", "tcp"}))
	if err != nil {
		return nil, err
	}
	var nets []network
	for i, n := range all {
		if keep[i] {
			nets = append(nets, n)
		}
	}
	withSockperf := keep[len(all)]
	u := &latencyRun{rounds: fullRounds, pointTime: env.PointDuration(time.Second, 50*time.Millisecond),
		samples: map[[2]string]map[int][]latencySample{}}
	if env.Quick {
		u.rounds = 1
	}
	steps := len(nets) * u.rounds * len(latencySizes)
	bar := env.Progress(steps, time.Duration(steps)*u.pointTime*11/10, "sock-latency")
	defer bar.Finish()
	for _, n := range nets {
		if err := u.system(ctx, env, n, bar); err != nil {
			return nil, err
		}
	}
	if withSockperf {
		if err := u.sockperf(ctx, env); err != nil {
			return nil, err
		}
	}
	r := &bench.Result{Name: "sock-latency", Title: "Ping-pong round trips: sock next to Go's loopback TCP, Unix domain sockets and sockperf",
		Columns: latencyColumns, Meta: bench.Meta{Transport: transports(nets)}}
	if withSockperf {
		r.Meta.Transport = strings.TrimPrefix(r.Meta.Transport+", "+sockperfLabel, ", ")
	}
	u.rows(r)
	r.Notes = append(u.notes, u.ratioNotes(socks)...)
	r.Notes = append(r.Notes, fmt.Sprintf("Each system's server runs in its own process (`rdmakit sock serve --app echo`, sockperf's own server); "+
		"the client is one goroutine in the experiment's process writing SIZE bytes and reading them back (io.ReadFull), one round trip at a time, "+
		"one fresh connection per point, timed by time.Now into a preallocated buffer. Each point runs %v after a warm-up, %d round(s); "+
		"every figure is the median of the rounds and spread is (max−min)/median of p50.", u.pointTime, u.rounds),
		"vs_tcp and vs_uds are p50 divided by net/tcp's and net/unix's p50 at the same size in this run.")
	if len(socks) > 0 {
		r.Notes = append(r.Notes, sockNote())
	}
	r.Plots = []bench.Plot{{Title: "round trip p50 against size", X: "size", Y: "p50",
		Series: []string{"system", "mode"}, LogX: true, LogY: true}}
	return r, nil
}

// system starts n's echo server and measures every size, rounds times.
func (u *latencyRun) system(ctx context.Context, env *bench.Env, n network, bar *bench.Progress) error {
	srv, err := startSystem(ctx, env, n, Echo, &u.notes)
	if err != nil || srv == nil {
		return err
	}
	defer srv.Stop()
	key := [2]string{n.label(), n.mode}
	u.order = append(u.order, key)
	u.samples[key] = map[int][]latencySample{}
	lat := stats.NewLatencies(latencyCapacity)
	for range u.rounds {
		for _, size := range latencySizes {
			bar.Describe(fmt.Sprintf("sock-latency %s %d B", n.label(), size))
			s, err := measureLatency(ctx, n, srv.uri, size, u.pointTime, lat)
			if err != nil {
				err = srv.Explain(err)
				return fmt.Errorf("sockexp: %s, %d B: %w", n.label(), size, err)
			}
			u.samples[key][size] = append(u.samples[key][size], s)
			bar.Add(1)
		}
	}
	return nil
}

// latencyCapacity is how many round trips a point keeps for its
// percentiles (the most recent, when it makes more).
const latencyCapacity = 1 << 20

// measureLatency dials uri and times round trips of size bytes for d,
// after a warm-up of a tenth of d, into lat.
func measureLatency(ctx context.Context, n network, uri string, size int, d time.Duration, lat *stats.Latencies) (latencySample, error) {
	c, err := n.dial(ctx, uri)
	if err != nil {
		return latencySample{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := c.SetDeadline(time.Now().Add(d + d/10 + roundTripGrace)); err != nil {
		return latencySample{}, err
	}
	out, in := make([]byte, size), make([]byte, size)
	for i := range out {
		out[i] = byte(i*7 + 1)
	}
	lat.Reset()
	if err := pingPong(c, out, in, time.Now().Add(d/10), lat); err != nil {
		return latencySample{}, err
	}
	if !bytes.Equal(in, out) {
		return latencySample{}, errEcho
	}
	lat.Reset()
	if err := pingPong(c, out, in, time.Now().Add(d), lat); err != nil {
		return latencySample{}, err
	}
	if ctx.Err() != nil {
		return latencySample{}, ctx.Err()
	}
	s := lat.Summary()
	return latencySample{p50: s.P50, p99: s.P99, mean: s.Avg, count: s.Count}, nil
}

// errEcho is an echo server that answered other bytes than it was sent.
var errEcho = errors.New("sockexp: the echo came back different")

// pingPong writes out and reads len(in) bytes back on c, one round trip
// at a time, recording each into lat, until the time is past until (at
// least one round trip). It allocates nothing.
func pingPong(c net.Conn, out, in []byte, until time.Time, lat *stats.Latencies) error {
	t0 := time.Now()
	for {
		if _, err := c.Write(out); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, in); err != nil {
			return err
		}
		t1 := time.Now()
		lat.Record(t1.Sub(t0))
		if !t1.Before(until) {
			return nil
		}
		t0 = t1
	}
}
