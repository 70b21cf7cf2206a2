package txnexp

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// running is a started system and its samples, by point. Its samples
// and the few figures the notes need outlive its deployment: stop ends
// the servers and drops the client.
type running struct {
	sys system
	// dep is nil once the system is stopped.
	dep       *deployment
	transport string
	samples   map[string][]sample
	// pg is whether the system is PostgreSQL.
	pg bool
	// countsCommits is whether the client counted its commits' round
	// trips (deployment.commitTrips: FORD); mostCommitRounds is the most
	// one commit took, read when the system stopped.
	countsCommits    bool
	mostCommitRounds uint64
}

// newRunning records s, started as dep.
func newRunning(s system, dep *deployment) *running {
	return &running{sys: s, dep: dep, transport: dep.transport, samples: map[string][]sample{},
		pg: dep.pg != nil, countsCommits: dep.commitTrips != nil}
}

// stop reads the figures the notes need from the client, stops the
// system and drops its deployment; it does nothing the second time.
func (rs *running) stop() {
	if rs.dep == nil {
		return
	}
	if rs.dep.commitTrips != nil {
		_, _, rs.mostCommitRounds = rs.dep.commitTrips()
	}
	rs.dep.stop()
	rs.dep = nil
}

// stat is the medians of a system's samples at one point.
type stat struct {
	rate, spread, p50, p99, aborts, trips, nodeCPU float64
	checked                                        int
	unknown, failed                                int64
	firstErr                                       error
}

// medians summarises samples: the median of each figure over the
// rounds, the spread of the rate ((max−min)/median, NaN with one round).
func medians(samples []sample) stat {
	med := func(f func(sample) float64) float64 {
		var v []float64
		for _, s := range samples {
			if x := f(s); !math.IsNaN(x) {
				v = append(v, x)
			}
		}
		if len(v) == 0 {
			return math.NaN()
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	kops := func(s sample) float64 { return s.res.Rate() / 1e3 }
	st := stat{
		rate:    med(kops),
		spread:  math.NaN(),
		p50:     med(func(s sample) float64 { return us(s.res.P50) }),
		p99:     med(func(s sample) float64 { return us(s.res.P99) }),
		aborts:  med(func(s sample) float64 { return s.res.AbortRate() }),
		trips:   med(func(s sample) float64 { return s.trips }),
		nodeCPU: med(func(s sample) float64 { return s.nodeCPU }),
	}
	if len(samples) > 1 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range samples {
			lo, hi = min(lo, kops(s)), max(hi, kops(s))
		}
		st.spread = 100 * (hi - lo) / st.rate
	}
	for _, s := range samples {
		st.checked = max(st.checked, s.checked)
		st.unknown += s.unknown
		st.failed += s.failed
		if st.firstErr == nil {
			st.firstErr = s.res.FirstErr
		}
	}
	return st
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// num is x, or nil (not applicable) for NaN and infinities.
func num(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

// ratio is a/b, or nil when either is unknown.
func ratio(a, b float64) any {
	if b == 0 {
		return nil
	}
	return num(a / b)
}

// checkedCell is the checked column: the history's size, nil when the
// system is not traced.
func checkedCell(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// failures is a note about a point's transactions that did not end in
// a commit or a rejection, or "".
func failures(name, point string, st stat) string {
	if st.unknown+st.failed == 0 {
		return ""
	}
	return fmt.Sprintf("%s, %s: %d transactions of unknown outcome and %d failed (first: %v); not counted in rate or latency.",
		name, point, st.unknown, st.failed, st.firstErr)
}
