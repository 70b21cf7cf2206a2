package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/bench/perf"
	"github.com/rdmakit/rdmakit/transport/loop"
)

func init() {
	Register(Experiment{
		Name:        "perf",
		Description: "perftest-style latency and bandwidth of READ, WRITE, SEND, CAS and FAA, 8 B to 1 MiB, over a client/server device pair (default: the loop fabric)",
		Run:         runPerf,
	})
}

// Point durations of the perf experiment.
const (
	perfPoint      = 200 * time.Millisecond
	perfQuickPoint = 25 * time.Millisecond
)

// perfColumns are the columns of PerfResult.
var perfColumns = []Column{
	{Name: "op"}, {Name: "test"}, {Name: "bytes", Unit: "B"}, {Name: "iterations"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"}, {Name: "avg", Unit: "µs"},
	{Name: "rate", Unit: "Mops"}, {Name: "bandwidth", Unit: "GB/s"},
}

func runPerf(ctx context.Context, env *Env) (*Result, error) {
	sizes := perf.PowersOfTwo(perf.MinSize, perf.MaxSize)
	if env.Quick {
		sizes = []int{8, 64, 512, 4096, 32 << 10, 256 << 10, 1 << 20}
	}
	base := env.DeviceBase("perf")
	cfg := perf.Config{Client: base + "/client", Server: base + "/server", Poll: env.Poll}
	pl := &perf.Plan{Ops: perf.Ops, Tests: []perf.Test{perf.Lat, perf.BW}, Sizes: sizes,
		Stop: perf.Stop{Duration: env.PointDuration(perfPoint, perfQuickPoint)}}
	pair, err := perf.Open(cfg)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	cells := pl.Cells()
	bar := env.Progress(len(cells), pl.Estimate(), "perf")
	defer bar.Finish()
	ms, err := pair.Run(ctx, pl, func(m perf.Measurement) {
		env.Log.Debug("perf cell", "op", m.Op, "test", m.Test, "bytes", m.Size, "mops", m.Mops())
		bar.Add(1)
	})
	if err != nil {
		return nil, err
	}
	r := PerfResult(ms, pair.Config())
	r.Meta.Transport = pair.Transport()
	r.Meta.Device = cfg.Client + " → " + cfg.Server
	if r.Meta.Transport == loop.Scheme {
		r.Notes = append(r.Notes, "loop: both nodes run in this process; the numbers are the software NIC's cost (memory copies, locks, completion queues), not a wire's.")
	}
	return r, nil
}

// PerfResult turns perf measurements into a result table with a latency
// and a bandwidth plot. cfg is the pair's configuration, for the notes.
func PerfResult(ms []perf.Measurement, cfg perf.Config) *Result {
	r := &Result{
		Name:    "perf",
		Title:   "Verbs latency and bandwidth by operation and message size",
		Columns: perfColumns,
		Notes: []string{
			"lat: one operation at a time, timed from post to polled completion (ib_*_lat); SEND is half the round trip of a message echoed by the server.",
			fmt.Sprintf("bw: %d operations outstanding, posted in lists of %d with the last signaled (ib_*_bw); SENDs never outrun the server's posted receives.", cfg.Window, cfg.Batch),
			"rate is millions of operations per second; bandwidth is 10⁹ bytes per second of payload.",
			"CAS and FAA are 8-byte atomics, measured at 8 bytes only.",
		},
		Plots: []Plot{
			{Title: "Latency (p50)", X: "bytes", Y: "p50", Series: []string{"op"}, Where: map[string]string{"test": "lat"}, LogX: true, LogY: true},
			{Title: "Bandwidth", X: "bytes", Y: "bandwidth", Series: []string{"op"}, Where: map[string]string{"test": "bw"}, LogX: true, LogY: true},
		},
	}
	us := func(d time.Duration) any { return float64(d) / 1e3 }
	for _, m := range ms {
		var p50, p99, avg any
		if m.Test == perf.Lat {
			p50, p99, avg = us(m.Lat.P50), us(m.Lat.P99), us(m.Lat.Avg)
		}
		r.AddRow(m.Op.String(), m.Test.String(), m.Size, m.Iters, p50, p99, avg, m.Mops(), m.GBps())
	}
	return r
}
