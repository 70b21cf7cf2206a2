package sockexp

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rdmakit/rdmakit/bench"
)

func init() {
	bench.Register(bench.Experiment{
		Name: "sock-throughput",
		Description: "bulk one-way writes of 4 KiB to 1 MiB per Write over 1 and 8 connections: " +
			"sock (shm, tcp) next to Go's loopback TCP and Unix domain sockets, GB/s",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			return runThroughput(ctx, env, netNets(), sockNets())
		},
	})
}

// throughputSizes are the bytes per Write call of sock-throughput;
// throughputConns its connections.
var (
	throughputSizes = []int{4 << 10, 64 << 10, 256 << 10, 1 << 20}
	throughputConns = []int{1, 8}
)

// ratioSize is the Write size of the throughput ratio in the notes.
const ratioSize = 64 << 10

var throughputColumns = []bench.Column{
	{Name: "system"}, {Name: "mode"}, {Name: "conns"}, {Name: "size", Unit: "B"},
	{Name: "throughput", Unit: "GB/s"}, {Name: "spread", Unit: "%"}, {Name: "vs_tcp", Unit: "×"},
}

// throughputPoint is a row's key: system, mode, connections, size.
type throughputPoint struct {
	label, mode string
	conns, size int
}

// throughputRun is a sock-throughput run: its settings and samples.
type throughputRun struct {
	rounds    int
	pointTime time.Duration
	order     []throughputPoint
	gbps      map[throughputPoint][]float64
	notes     []string
}

// runThroughput runs sock-throughput over the baselines and the sock
// systems, one system at a time.
func runThroughput(ctx context.Context, env *bench.Env, baselines, socks []network) (*bench.Result, error) {
	nets, err := keepNets(env, append(append([]network(nil), baselines...), socks...))
	if err != nil {
		return nil, err
	}
	u := &throughputRun{rounds: fullRounds, pointTime: env.PointDuration(time.Second, 50*time.Millisecond),
		gbps: map[throughputPoint][]float64{}}
	if env.Quick {
		u.rounds = 1
	}
	steps := len(nets) * u.rounds * len(throughputSizes) * len(throughputConns)
	bar := env.Progress(steps, time.Duration(steps)*u.pointTime*11/10, "sock-throughput")
	defer bar.Finish()
	for _, n := range nets {
		if err := u.system(ctx, env, n, bar); err != nil {
			return nil, err
		}
	}
	r := &bench.Result{Name: "sock-throughput", Title: "Bulk one-way writes: sock next to Go's loopback TCP and Unix domain sockets",
		Columns: throughputColumns, Meta: bench.Meta{Transport: transports(nets)}}
	for _, p := range u.order {
		v := u.gbps[p]
		r.AddRow(p.label, p.mode, p.conns, p.size, median(v), num(spread(v)), num(ratio(median(v), u.baseline(p))))
	}
	r.Notes = append(u.notes, u.ratioNotes(socks)...)
	r.Notes = append(r.Notes, fmt.Sprintf("Each system's server runs in its own process (`rdmakit sock serve --app sink`); "+
		"the experiment's process writes from one goroutine per connection, all connections at once, SIZE bytes per Write call from one "+
		"preallocated buffer, in batches of at least %d KiB whose first 8 bytes carry the batch's length; the server reads and discards each batch and "+
		"acknowledges it with one byte. Throughput is the bytes of every connection over the time from the first write to the last ack "+
		"(the sender's clock, with a final ack: what the receiver has read). Each point runs about %v, %d round(s), a warm-up of a tenth of it first; "+
		"figures are medians of the rounds, spread is (max−min)/median.", minBatch>>10, u.pointTime, u.rounds),
		"vs_tcp is the throughput divided by net/tcp's at the same size and connections in this run; GB/s is 10⁹ bytes per second.")
	if len(socks) > 0 {
		r.Notes = append(r.Notes, sockNote())
	}
	for _, c := range throughputConns {
		r.Plots = append(r.Plots, bench.Plot{Title: fmt.Sprintf("throughput, %d connection(s)", c), X: "size", Y: "throughput",
			Series: []string{"system", "mode"}, Where: map[string]string{"conns": fmt.Sprint(c)}, LogX: true})
	}
	return r, nil
}

// system starts n's sink and measures every point, rounds times.
func (u *throughputRun) system(ctx context.Context, env *bench.Env, n network, bar *bench.Progress) error {
	srv, err := startSystem(ctx, env, n, Sink, &u.notes)
	if err != nil || srv == nil {
		return err
	}
	defer srv.Stop()
	for round := range u.rounds {
		for _, conns := range throughputConns {
			for _, size := range throughputSizes {
				bar.Describe(fmt.Sprintf("sock-throughput %s %d×%d B", n.label(), conns, size))
				if _, err := bulk(ctx, n, srv.uri, conns, size, u.pointTime/10); err != nil {
					return u.failed(srv, n, conns, size, err)
				}
				res, err := bulk(ctx, n, srv.uri, conns, size, u.pointTime)
				if err != nil {
					return u.failed(srv, n, conns, size, err)
				}
				p := throughputPoint{n.label(), n.mode, conns, size}
				if round == 0 {
					u.order = append(u.order, p)
				}
				u.gbps[p] = append(u.gbps[p], res.gbps())
				bar.Add(1)
			}
		}
	}
	return nil
}

// failed is the error of a point that failed.
func (u *throughputRun) failed(srv *server, n network, conns, size int, err error) error {
	err = srv.Explain(err)
	return fmt.Errorf("sockexp: %s, %d × %d B: %w", n.label(), conns, size, err)
}

// baseline is net/tcp's median throughput at p's connections and size,
// NaN without it.
func (u *throughputRun) baseline(p throughputPoint) float64 {
	for _, q := range u.order {
		if q.label == tcpLabel && q.conns == p.conns && q.size == p.size {
			return median(u.gbps[q])
		}
	}
	return math.NaN()
}

// ratioNotes says, for each sock system, its throughput against
// net/tcp's with 64 KiB writes on one connection.
func (u *throughputRun) ratioNotes(socks []network) []string {
	var notes []string
	for _, n := range socks {
		p := throughputPoint{n.label(), n.mode, 1, ratioSize}
		v, ok := u.gbps[p]
		if !ok {
			continue
		}
		notes = append(notes, fmt.Sprintf("%s (%s), %d KiB writes on one connection, same run: %.2f GB/s, against net/tcp %s.",
			n.label(), n.mode, ratioSize>>10, median(v), times(ratio(median(v), u.baseline(p)))))
	}
	return notes
}
