package perf_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/bench/perf"
	_ "github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var fabricSeq atomic.Int64

func openPair(tb testing.TB, poll verbs.PollPolicy) *perf.Pair {
	tb.Helper()
	f := fmt.Sprintf("loop://perftest%d", fabricSeq.Add(1))
	p, err := perf.Open(perf.Config{Client: f + "/client", Server: f + "/server", Poll: poll, Window: 32, MaxSize: 64 << 10})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

func TestEveryCellRuns(t *testing.T) {
	for _, poll := range []verbs.PollPolicy{verbs.PollAdaptive, verbs.PollBusy, verbs.PollEvent} {
		t.Run(poll.String(), func(t *testing.T) {
			p := openPair(t, poll)
			pl := &perf.Plan{Ops: perf.Ops, Tests: []perf.Test{perf.Lat, perf.BW}, Sizes: []int{8, 4096, 64 << 10},
				Stop: perf.Stop{Iters: 500}}
			ms, err := p.Run(context.Background(), pl, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 3*2*3+2*2 {
				t.Fatalf("%d measurements", len(ms))
			}
			for _, m := range ms {
				if m.Iters != 500 || m.Rate() <= 0 || m.GBps() <= 0 || (m.Test == perf.BW && m.Peak < m.Rate()*0.999) {
					t.Errorf("%v %v %d: iters=%d rate=%v peak=%v", m.Op, m.Test, m.Size, m.Iters, m.Rate(), m.Peak)
				}
				if m.Test == perf.Lat && (m.Lat.Count != m.Iters || m.Lat.P50 <= 0 || m.Lat.P99 < m.Lat.P50 || m.Lat.Max < m.Lat.P99) {
					t.Errorf("%v lat %d: %+v", m.Op, m.Size, m.Lat)
				}
			}
		})
	}
}

func TestDurationStop(t *testing.T) {
	p := openPair(t, verbs.PollAdaptive)
	for _, c := range []perf.Cell{{Op: perf.Read, Test: perf.Lat, Size: 8}, {Op: perf.Send, Test: perf.BW, Size: 1024}} {
		start := time.Now()
		m, err := p.Measure(context.Background(), c, perf.Stop{Duration: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if m.Iters == 0 || m.Elapsed < 20*time.Millisecond || time.Since(start) > 5*time.Second {
			t.Errorf("%+v: iters=%d elapsed=%v", c, m.Iters, m.Elapsed)
		}
	}
}

func TestMeasuredLoopAllocatesNothing(t *testing.T) {
	checkLoopAllocs(t, openPair(t, verbs.PollBusy), 5000)
}

// checkLoopAllocs measures every operation and test twice, with 64 and
// with many operations: per-cell setup may allocate, the measured loop
// must not, so the count does not grow with the number of operations.
func checkLoopAllocs(t *testing.T, p *perf.Pair, many int) {
	t.Helper()
	for _, op := range perf.Ops {
		for _, test := range []perf.Test{perf.Lat, perf.BW} {
			c := perf.Cell{Op: op, Test: test, Size: 8}
			allocs := func(iters int) float64 {
				return testing.AllocsPerRun(3, func() {
					if _, err := p.Measure(context.Background(), c, perf.Stop{Iters: iters}); err != nil {
						t.Fatal(err)
					}
				})
			}
			if few, lots := allocs(64), allocs(many); lots > few {
				t.Errorf("%v %v: %v allocations for 64 ops, %v for %d", op, test, few, lots, many)
			}
		}
		c := perf.Cell{Op: op, Test: perf.Lat, Size: 8}
		allocs := func(iters int) float64 {
			return testing.AllocsPerRun(3, func() {
				if _, err := p.MeasureAvg(context.Background(), c, perf.Stop{Iters: iters}); err != nil {
					t.Fatal(err)
				}
			})
		}
		if few, lots := allocs(64), allocs(many); lots > few {
			t.Errorf("%v MeasureAvg: %v allocations for 64 ops, %v for %d", op, few, lots, many)
		}
	}
}

func TestMeasureAvg(t *testing.T) {
	p := openPair(t, verbs.PollBusy)
	for _, op := range []perf.Op{perf.Read, perf.Write, perf.CAS, perf.Send} {
		c := perf.Cell{Op: op, Test: perf.BW, Size: 8} // Test is ignored: always the latency loop
		m, err := p.MeasureAvg(context.Background(), c, perf.Stop{Iters: 700})
		if err != nil {
			t.Fatal(err)
		}
		want := m.Elapsed / 700
		if op == perf.Send {
			want /= 2
		}
		if m.Test != perf.Lat || m.Iters != 700 || m.Elapsed <= 0 || m.Lat.Count != 700 || m.Lat.Avg != want ||
			m.Lat.P50 != 0 || m.Lat.P99 != 0 || m.Lat.Max != 0 {
			t.Errorf("%v: %+v", op, m)
		}
		m, err = p.MeasureAvg(context.Background(), c, perf.Stop{Duration: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if m.Iters == 0 || m.Iters%256 != 0 || m.Elapsed < 10*time.Millisecond || m.Lat.Avg <= 0 {
			t.Errorf("%v by duration: iters=%d elapsed=%v avg=%v", op, m.Iters, m.Elapsed, m.Lat.Avg)
		}
	}
	if _, err := p.MeasureAvg(context.Background(), perf.Cell{Op: perf.CAS, Size: 16}, perf.Stop{Iters: 1}); err == nil {
		t.Error("a 16-byte CAS was accepted")
	}
}

func TestBadCells(t *testing.T) {
	p := openPair(t, verbs.PollAdaptive)
	for _, c := range []perf.Cell{{Op: perf.CAS, Test: perf.Lat, Size: 16}, {Op: perf.Read, Test: perf.Lat, Size: 1 << 20}, {Op: 0, Test: perf.Lat, Size: 8}} {
		if _, err := p.Measure(context.Background(), c, perf.Stop{Iters: 1}); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestParse(t *testing.T) {
	s, err := perf.ParseSizes("8-1048576")
	if err != nil || len(s) != 18 || s[0] != 8 || s[17] != 1<<20 {
		t.Errorf("ParseSizes range: %v %v", s, err)
	}
	s, err = perf.ParseSizes("4K,100,1M")
	if err != nil || len(s) != 3 || s[0] != 4096 || s[1] != 100 || s[2] != 1<<20 {
		t.Errorf("ParseSizes list: %v %v", s, err)
	}
	for _, bad := range []string{"", "x", "0", "64-8", "-5"} {
		if _, err := perf.ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
	ops, err := perf.ParseOps("all")
	if err != nil || len(ops) != 5 {
		t.Errorf("ParseOps(all) = %v %v", ops, err)
	}
	ops, err = perf.ParseOps("read,faa")
	if err != nil || len(ops) != 2 || ops[0] != perf.Read || ops[1] != perf.FAA {
		t.Errorf("ParseOps list = %v %v", ops, err)
	}
	if _, err := perf.ParseOps("nope"); err == nil {
		t.Error("ParseOps(nope) accepted")
	}
	if ts, err := perf.ParseTests("both"); err != nil || len(ts) != 2 {
		t.Errorf("ParseTests = %v %v", ts, err)
	}
	if _, err := perf.ParseTests("x"); err == nil {
		t.Error("ParseTests(x) accepted")
	}
}

// Measure the latency of 8-byte RDMA READs between two loop nodes.
func Example() {
	p, err := perf.Open(perf.Config{Client: "loop://example/client", Server: "loop://example/server", Poll: verbs.PollBusy})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	m, err := p.Measure(context.Background(), perf.Cell{Op: perf.Read, Test: perf.Lat, Size: 8}, perf.Stop{Iters: 1000})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Op, m.Test, m.Size, m.Iters, m.Lat.P50 > 0 && m.Lat.P99 >= m.Lat.P50)
	// Output: read lat 8 1000 true
}

func TestOpenErrors(t *testing.T) {
	if _, err := perf.Open(perf.Config{Client: "nosuch://a", Server: "nosuch://b"}); err == nil {
		t.Error("unknown scheme accepted")
	}
	// The client opened, the server did not: the client must be closed
	// again, so the same URI opens afterwards.
	for range 2 {
		if _, err := perf.Open(perf.Config{Client: "loop://openerr/client", Server: "bad"}); err == nil {
			t.Fatal("bad server URI accepted")
		}
	}
}
