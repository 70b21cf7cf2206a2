package sockexp

import (
	"fmt"
	"math"

	"github.com/rdmakit/rdmakit/bench"
)

// latencyStat is the medians of a system's rounds at one size.
type latencyStat struct {
	p50, p99, mean, spread float64 // µs; spread in %
	count                  int
}

// stat summarises the samples of key at size; ok is false without any.
func (u *latencyRun) stat(key [2]string, size int) (latencyStat, bool) {
	ss := u.samples[key][size]
	if len(ss) == 0 {
		return latencyStat{}, false
	}
	var p50, p99, mean []float64
	st := latencyStat{}
	for _, s := range ss {
		p50 = append(p50, us(s.p50))
		p99 = append(p99, us(s.p99))
		mean = append(mean, us(s.mean))
		st.count += s.count
	}
	st.p50, st.p99, st.mean, st.spread = median(p50), median(p99), median(mean), spread(p50)
	return st, true
}

// baselineP50 is the p50 of the first system labelled label at size,
// NaN without one.
func (u *latencyRun) baselineP50(label string, size int) float64 {
	for _, k := range u.order {
		if k[0] == label {
			if st, ok := u.stat(k, size); ok {
				return st.p50
			}
		}
	}
	return math.NaN()
}

// rows adds a row per system and size.
func (u *latencyRun) rows(r *bench.Result) {
	for _, k := range u.order {
		for _, size := range latencySizes {
			st, ok := u.stat(k, size)
			if !ok {
				continue
			}
			r.AddRow(k[0], k[1], size, st.p50, st.p99, st.mean, num(st.spread), st.count,
				num(ratio(st.p50, u.baselineP50(tcpLabel, size))), num(ratio(st.p50, u.baselineP50(unixLabel, size))))
		}
	}
}

// ratioNotes says, for each sock system, its p50 at the smallest size
// against net/tcp's and net/unix's.
func (u *latencyRun) ratioNotes(socks []network) []string {
	size := latencySizes[0]
	var notes []string
	for _, n := range socks {
		k := [2]string{n.label(), n.mode}
		st, ok := u.stat(k, size)
		if !ok {
			continue
		}
		notes = append(notes, fmt.Sprintf("%s (%s) at %d B, same run: p50 %.2f µs; against net/tcp %s, against net/unix %s.",
			n.label(), n.mode, size, st.p50, times(ratio(st.p50, u.baselineP50(tcpLabel, size))),
			times(ratio(st.p50, u.baselineP50(unixLabel, size)))))
	}
	return notes
}
