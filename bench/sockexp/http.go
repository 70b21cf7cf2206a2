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
		Name: "sock-http",
		Description: "net/http hello-world over sock (shm, tcp) next to Go's loopback TCP and Unix domain sockets, " +
			"1, 8 and 32 keep-alive clients: requests per second, p50, p99",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			return runHTTP(ctx, env, netNets(), sockNets())
		},
	})
}

// httpClients are the concurrencies of sock-http: goroutines each with
// one request outstanding, the same for every system.
var httpClients = []int{1, 8, 32}

var httpColumns = []bench.Column{
	{Name: "system"}, {Name: "mode"}, {Name: "clients"},
	{Name: "rate", Unit: "kreq/s"}, {Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"},
	{Name: "spread", Unit: "%"}, {Name: "vs_tcp", Unit: "×"},
}

// httpPoint is a row's key: system, mode, clients.
type httpPoint struct {
	label, mode string
	clients     int
}

// httpRun is a sock-http run: its settings and samples.
type httpRun struct {
	rounds    int
	pointTime time.Duration
	order     []httpPoint
	samples   map[httpPoint][]httpResult
	notes     []string
}

// runHTTP runs sock-http over the baselines and the sock systems, one
// system at a time.
func runHTTP(ctx context.Context, env *bench.Env, baselines, socks []network) (*bench.Result, error) {
	nets, err := keepNets(env, append(append([]network(nil), baselines...), socks...))
	if err != nil {
		return nil, err
	}
	u := &httpRun{rounds: fullRounds, pointTime: env.PointDuration(2*time.Second, 50*time.Millisecond),
		samples: map[httpPoint][]httpResult{}}
	if env.Quick {
		u.rounds = 1
	}
	steps := len(nets) * u.rounds * len(httpClients)
	bar := env.Progress(steps, time.Duration(steps)*u.pointTime*11/10, "sock-http")
	defer bar.Finish()
	for _, n := range nets {
		if err := u.system(ctx, env, n, bar); err != nil {
			return nil, err
		}
	}
	r := &bench.Result{Name: "sock-http", Title: "net/http hello-world: sock next to Go's loopback TCP and Unix domain sockets",
		Columns: httpColumns, Meta: bench.Meta{Transport: transports(nets)}}
	for _, p := range u.order {
		st := u.stat(p)
		r.AddRow(p.label, p.mode, p.clients, st.rate, st.p50, st.p99, num(st.spread), num(ratio(st.rate, u.baselineRate(p.clients))))
	}
	r.Notes = append(u.notes, u.ratioNotes(socks)...)
	r.Notes = append(r.Notes, fmt.Sprintf("Each system's server runs in its own process (`rdmakit sock serve --app http`: "+
		"http.Serve on the system's listener, one handler writing %q); the client is one http.Client in the experiment's process "+
		"whose Transport dials the system (DialContext), keeping up to CLIENTS connections alive, and CLIENTS goroutines each sending "+
		"GET requests one after the other. Each point runs %v after a warm-up of a tenth of it, %d round(s); figures are medians of the rounds, "+
		"spread is (max−min)/median of the rate.", HelloBody, u.pointTime, u.rounds),
		"vs_tcp is the rate divided by net/tcp's at the same clients in this run.")
	if len(socks) > 0 {
		r.Notes = append(r.Notes, sockNote())
	}
	r.Plots = []bench.Plot{{Title: "requests per second against clients", X: "clients", Y: "rate",
		Series: []string{"system", "mode"}, LogX: true}}
	return r, nil
}

// system starts n's HTTP server and measures every concurrency, rounds
// times.
func (u *httpRun) system(ctx context.Context, env *bench.Env, n network, bar *bench.Progress) error {
	srv, err := startSystem(ctx, env, n, HTTP, &u.notes)
	if err != nil || srv == nil {
		return err
	}
	defer srv.Stop()
	for round := range u.rounds {
		for _, clients := range httpClients {
			bar.Describe(fmt.Sprintf("sock-http %s %d clients", n.label(), clients))
			res, err := u.point(ctx, n, srv.uri, clients)
			if err != nil {
				err = srv.Explain(err)
				return fmt.Errorf("sockexp: %s, %d clients: %w", n.label(), clients, err)
			}
			p := httpPoint{n.label(), n.mode, clients}
			if round == 0 {
				u.order = append(u.order, p)
			}
			u.samples[p] = append(u.samples[p], res)
			bar.Add(1)
		}
	}
	return nil
}

// point measures one concurrency with a fresh client: a warm-up that
// opens its connections, then the timed load.
func (u *httpRun) point(ctx context.Context, n network, uri string, clients int) (httpResult, error) {
	client := newHTTPClient(n, uri, clients)
	defer client.CloseIdleConnections()
	if _, err := loadHTTP(ctx, client, clients, u.pointTime/10); err != nil {
		return httpResult{}, err
	}
	res, err := loadHTTP(ctx, client, clients, u.pointTime)
	if err == nil {
		err = ctx.Err()
	}
	return res, err
}

// httpStat is the medians of a point's rounds.
type httpStat struct {
	rate, p50, p99, spread float64 // kreq/s, µs, µs, %
}

func (u *httpRun) stat(p httpPoint) httpStat {
	var rate, p50, p99 []float64
	for _, s := range u.samples[p] {
		rate = append(rate, s.rate()/1e3)
		p50 = append(p50, us(s.p50))
		p99 = append(p99, us(s.p99))
	}
	return httpStat{rate: median(rate), p50: median(p50), p99: median(p99), spread: spread(rate)}
}

// baselineRate is net/tcp's median rate at clients, NaN without it.
func (u *httpRun) baselineRate(clients int) float64 {
	for _, q := range u.order {
		if q.label == tcpLabel && q.clients == clients {
			return u.stat(q).rate
		}
	}
	return math.NaN()
}

// ratioNotes says, for each sock system, its rate against net/tcp's at
// every concurrency.
func (u *httpRun) ratioNotes(socks []network) []string {
	var notes []string
	for _, n := range socks {
		var labels []string
		var xs []float64
		for _, c := range httpClients {
			p := httpPoint{n.label(), n.mode, c}
			if _, ok := u.samples[p]; !ok {
				continue
			}
			labels = append(labels, fmt.Sprintf("%d client(s)", c))
			xs = append(xs, ratio(u.stat(p).rate, u.baselineRate(c)))
		}
		if len(xs) > 0 {
			notes = append(notes, fmt.Sprintf("%s (%s) requests per second against net/tcp, same run: %s.",
				n.label(), n.mode, joinRatios(labels, xs)))
		}
	}
	return notes
}
