package sockexp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rdmakit/rdmakit/bench/stats"
)

// httpResult is one point of sock-http: requests answered, their
// latency percentiles and the time they took.
type httpResult struct {
	requests int
	elapsed  time.Duration
	p50, p99 time.Duration
}

// rate is the requests per second.
func (h httpResult) rate() float64 { return float64(h.requests) / h.elapsed.Seconds() }

// httpSamples is how many latencies a point keeps, shared by its
// clients (each keeps its most recent share).
const httpSamples = 1 << 20

// errHTTP is a request that did not get the hello-world answer.
var errHTTP = errors.New("sockexp: unexpected HTTP answer")

// newHTTPClient is an http.Client whose every connection is dialled on
// n to uri, keeping up to clients connections alive.
func newHTTPClient(n network, uri string, clients int) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return n.dial(ctx, uri)
		},
		MaxIdleConns:        clients,
		MaxIdleConnsPerHost: clients,
		MaxConnsPerHost:     clients,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: roundTripGrace}
}

// loadHTTP sends GET requests through client from clients goroutines,
// each waiting for its answer before the next, for d; it returns the
// requests answered, their latency and the time taken.
func loadHTTP(ctx context.Context, client *http.Client, clients int, d time.Duration) (httpResult, error) {
	var (
		wg    sync.WaitGroup
		lat   = make([][]time.Duration, clients)
		count = make([]int, clients)
		errs  = make([]error, clients)
	)
	per := httpSamples / clients
	start := time.Now()
	until := start.Add(d)
	for i := range clients {
		lat[i] = make([]time.Duration, per)
		wg.Go(func() { count[i], errs[i] = getLoop(ctx, client, until, lat[i]) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return httpResult{}, err
	}
	all := make([]time.Duration, 0, httpSamples)
	res := httpResult{elapsed: elapsed}
	for i := range clients {
		all = append(all, lat[i][:min(count[i], per)]...)
		res.requests += count[i]
	}
	slices.Sort(all)
	res.p50, res.p99 = stats.Percentile(all, 50), stats.Percentile(all, 99)
	return res, nil
}

// getLoop sends requests until the time is past until, recording each
// one's latency into lat (round robin); it returns how many it sent.
func getLoop(ctx context.Context, client *http.Client, until time.Time, lat []time.Duration) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sockexp/", nil)
	if err != nil {
		return 0, err
	}
	body := make([]byte, len(HelloBody)+1)
	n := 0
	for t0 := time.Now(); t0.Before(until); n++ {
		resp, err := client.Do(req)
		if err != nil {
			return n, err
		}
		m, err := io.ReadFull(resp.Body, body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || m != len(HelloBody) || !errors.Is(err, io.ErrUnexpectedEOF) ||
			string(body[:m]) != HelloBody {
			return n, fmt.Errorf("%w: %s, %q", errHTTP, resp.Status, body[:m])
		}
		t1 := time.Now()
		lat[n%len(lat)] = t1.Sub(t0)
		t0 = t1
	}
	return n, nil
}
