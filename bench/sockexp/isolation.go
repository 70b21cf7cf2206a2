package sockexp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/bench/stats"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "sock-isolation",
		Description: "a 64 B ping-pong flow's p50, p99, p99.9 alone and next to a 1 MiB bulk flow (sock/shm: one partition " +
			"with slicing and batch limits on and off, two partitions; Go's loopback TCP) or 1,000 idle connections",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			return runIsolation(ctx, env, isolationSetups())
		},
	})
}

// The flows of sock-isolation: 64 B round trips next to 1 MiB Writes
// (one sink batch each), or next to idleConns connections that each made
// one round trip.
const (
	isoMsgSize    = 64
	isoBulkSize   = 1 << 20
	idleConns     = 1000
	quickIdle     = 100
	isoAcceptance = 3.0 // the bound on p99 next to bulk ÷ p99 alone
)

// isoLoad is what runs next to the latency flow.
type isoLoad uint8

const (
	loadAlone isoLoad = iota // nothing
	loadBulk                 // one connection writing 1 MiB batches to a sink
	loadIdle                 // idle connections, each having made one round trip
)

// placement is where a setup's latency and bulk connections must be.
type placement uint8

const (
	placeAny       placement = iota // not checked (not sock, or no bulk flow)
	placeSame                       // the same partition
	placeDifferent                  // different partitions
)

// isoSetup is one configuration of server and client: a system whose
// listen URI carries the sock settings (the clients dial the query the
// server announces, so both sides agree), and the loads it is measured
// under.
type isoSetup struct {
	net   network
	name  string // the setup column; unique
	loads []isoLoad
	place placement
}

// isolationSetups are the rows' configurations: sock over shared memory
// in Direct mode with both flows in one partition, slicing and batch
// limits on (the defaults) and off, with the flows in two partitions,
// the default configuration next to idle connections, and Go's loopback
// TCP under every load.
func isolationSetups() []isoSetup {
	shm := func(query string) network {
		return network{name: "sock", transport: "shm", mode: "direct", dial: Dial,
			listen: func() string { return "shm://" + uniqueName("iso") + query }}
	}
	bulk := []isoLoad{loadAlone, loadBulk}
	return []isoSetup{
		{net: shm("?partitions=1"), name: "1 partition, slicing on", loads: bulk, place: placeSame},
		{net: shm("?partitions=1&slicing=0&batch=-1"), name: "1 partition, slicing off", loads: bulk, place: placeSame},
		{net: shm("?partitions=2"), name: "2 partitions", loads: bulk, place: placeDifferent},
		{net: shm(""), name: "default", loads: []isoLoad{loadAlone, loadIdle}},
		{net: netNets()[0], name: "loopback", loads: []isoLoad{loadAlone, loadBulk, loadIdle}},
	}
}

// isoKey is a row: a setup under a load.
type isoKey struct {
	setup string
	load  isoLoad
}

// isoSample is one round of one row.
type isoSample struct {
	p50, p99, p999 time.Duration
	count          int
	gbps           float64 // the bulk flow's, while the latency flow was measured
	// latPart and bulkPart are the sock partitions of the latency and
	// bulk connections, −1 when not known.
	latPart, bulkPart int
}

// isoRun is a sock-isolation run: its settings and samples.
type isoRun struct {
	rounds    int
	pointTime time.Duration
	idle      int
	setups    []isoSetup
	order     []isoKey
	samples   map[isoKey][]isoSample
	notes     []string
}

// runIsolation measures setups one at a time, each with its own server.
func runIsolation(ctx context.Context, env *bench.Env, setups []isoSetup) (*bench.Result, error) {
	keep, err := keepSetups(env, setups)
	if err != nil {
		return nil, err
	}
	u := &isoRun{rounds: fullRounds, pointTime: env.PointDuration(time.Second, 50*time.Millisecond),
		idle: idleConns, samples: map[isoKey][]isoSample{}}
	if env.Quick {
		u.rounds, u.idle = 1, quickIdle
	}
	steps := 0
	for i, s := range setups {
		if keep[i] {
			u.setups = append(u.setups, s)
			steps += len(s.loads) * u.rounds
		}
	}
	bar := env.Progress(steps, time.Duration(steps)*u.pointTime*12/10, "sock-isolation")
	defer bar.Finish()
	for _, s := range u.setups {
		if err := u.setup(ctx, env, s, bar); err != nil {
			return nil, err
		}
	}
	return u.result(), nil
}

// keepSetups says which setups bench.Options.Only keeps (by system), or
// returns errNoSystem naming the systems when it keeps none.
func keepSetups(env *bench.Env, setups []isoSetup) ([]bool, error) {
	keep := make([]bool, len(setups))
	var systems []network
	seen := map[string]bool{}
	for i, s := range setups {
		keep[i] = env.Keeps(s.net.name, s.net.transport)
		if !seen[s.net.label()] {
			seen[s.net.label()] = true
			systems = append(systems, s.net)
		}
	}
	if !slices.Contains(keep, true) {
		_, err := selected(env, candidates(systems))
		return nil, err
	}
	return keep, nil
}

// setup starts s's server and measures each of its loads, rounds times.
func (u *isoRun) setup(ctx context.Context, env *bench.Env, s isoSetup, bar *bench.Progress) error {
	srv, err := startServer(ctx, env, s.net.listen(), Mux)
	if errors.Is(err, bench.ErrNoCommand) {
		u.notes = append(u.notes, fmt.Sprintf("%s, %s: no rows: %v.", s.net.label(), s.name, err))
		return nil
	}
	if err != nil {
		return err
	}
	defer srv.Stop()
	lat := stats.NewLatencies(latencyCapacity)
	for round := range u.rounds {
		for _, load := range s.loads {
			k := isoKey{s.name, load}
			bar.Describe(fmt.Sprintf("sock-isolation %s, %s: %s", s.net.label(), s.name, u.loadName(load)))
			smp, err := u.point(ctx, s, srv.uri, load, lat)
			if err != nil {
				err = srv.Explain(err)
				return fmt.Errorf("sockexp: %s, %s, %s: %w", s.net.label(), s.name, u.loadName(load), err)
			}
			if round == 0 {
				u.order = append(u.order, k)
			}
			u.samples[k] = append(u.samples[k], smp)
			bar.Add(1)
		}
	}
	return nil
}

// loadName is the load column.
func (u *isoRun) loadName(l isoLoad) string {
	switch l {
	case loadBulk:
		return fmt.Sprintf("bulk %d MiB", isoBulkSize>>20)
	case loadIdle:
		return fmt.Sprintf("%d idle", u.idle)
	}
	return "alone"
}

// errPlacement is a setup whose connections were not in the partitions
// it is about.
var errPlacement = errors.New("sockexp: connections not placed as the setup requires")

// point measures the latency flow for the point's time under load, on
// fresh connections, after a warm-up of a tenth of it (with the load
// already running).
func (u *isoRun) point(ctx context.Context, s isoSetup, uri string, load isoLoad, lat *stats.Latencies) (isoSample, error) {
	smp := isoSample{latPart: -1, bulkPart: -1}
	d := u.pointTime
	g := &connGroup{deadline: time.Now().Add(d + d/10 + roundTripGrace)}
	defer g.close()
	stop := context.AfterFunc(ctx, g.expire)
	defer stop()
	out, in := make([]byte, isoMsgSize), make([]byte, isoMsgSize)
	for i := range out {
		out[i] = byte(i*7 + 1)
	}
	if load == loadIdle {
		if err := g.idle(ctx, s.net, uri, u.idle, out, in); err != nil {
			return smp, err
		}
	}
	c, err := g.dial(ctx, s.net, uri, MuxEcho)
	if err != nil {
		return smp, err
	}
	smp.latPart = partitionOf(c)
	var bf *bulkFlow
	if load == loadBulk {
		bc, err := g.dial(ctx, s.net, uri, MuxSink)
		if err != nil {
			return smp, err
		}
		smp.bulkPart = partitionOf(bc)
		if err := s.place.check(smp.latPart, smp.bulkPart); err != nil {
			return smp, err
		}
		bf = startBulk(bc, isoBulkSize)
		defer bf.finish() // after an error; the error is the first one
	}
	lat.Reset()
	if err := pingPong(c, out, in, time.Now().Add(d/10), lat); err != nil {
		return smp, err
	}
	if !bytes.Equal(in, out) {
		return smp, errEcho
	}
	lat.Reset()
	a0, t0 := bf.acked(), time.Now()
	if err := pingPong(c, out, in, t0.Add(d), lat); err != nil {
		return smp, err
	}
	a1, t1 := bf.acked(), time.Now()
	if err := ctx.Err(); err != nil {
		return smp, err
	}
	if bf != nil {
		if err := bf.finish(); err != nil {
			return smp, err
		}
		smp.gbps = float64(a1-a0) * isoBulkSize / t1.Sub(t0).Seconds() / 1e9
	}
	sum := lat.Summary()
	smp.p50, smp.p99, smp.p999, smp.count = sum.P50, sum.P99, sum.P999, sum.Count
	return smp, nil
}

// check says whether connections in partitions lat and bulk are placed
// as p requires (−1: not a sock connection).
func (p placement) check(lat, bulk int) error {
	switch {
	case p == placeSame && (lat < 0 || lat != bulk):
		return fmt.Errorf("%w: latency flow in partition %d, bulk flow in %d, want the same", errPlacement, lat, bulk)
	case p == placeDifferent && (lat < 0 || bulk < 0 || lat == bulk):
		return fmt.Errorf("%w: latency flow in partition %d, bulk flow in %d, want different ones", errPlacement, lat, bulk)
	}
	return nil
}

// partitionOf is the sock partition of c, −1 for another connection.
func partitionOf(c any) int {
	if p, ok := c.(interface{ Partition() int }); ok {
		return p.Partition()
	}
	return -1
}
