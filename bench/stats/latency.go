// Package stats summarises latency samples: percentiles, mean, standard
// deviation and a log2 histogram, from a sample buffer allocated once.
package stats

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// Latencies records latency samples into a buffer allocated up front, so
// Record never allocates. Count, Min, Max, mean and standard deviation
// cover every recorded sample; once the buffer is full it wraps and the
// percentiles cover the most recent Cap() samples.
type Latencies struct {
	buf   []time.Duration
	n     int // samples recorded in total
	min   time.Duration
	max   time.Duration
	sum   float64
	sumSq float64
}

// NewLatencies returns a recorder with room for capacity samples
// (at least 1).
func NewLatencies(capacity int) *Latencies {
	l := &Latencies{buf: make([]time.Duration, max(capacity, 1))}
	l.Reset()
	return l
}

// Reset forgets every sample, keeping the buffer.
func (l *Latencies) Reset() {
	l.n, l.min, l.max, l.sum, l.sumSq = 0, math.MaxInt64, 0, 0, 0
}

// Cap is how many samples the buffer holds.
func (l *Latencies) Cap() int { return len(l.buf) }

// Count is how many samples were recorded since the last Reset.
func (l *Latencies) Count() int { return l.n }

// Record adds one sample. It does not allocate.
func (l *Latencies) Record(d time.Duration) {
	l.buf[l.n%len(l.buf)] = d
	l.n++
	l.min = min(l.min, d)
	l.max = max(l.max, d)
	f := float64(d)
	l.sum += f
	l.sumSq += f * f
}

// Summary is the digest of a set of latency samples.
type Summary struct {
	Count int           // samples recorded
	Min   time.Duration // fastest sample
	Max   time.Duration // slowest sample
	Avg   time.Duration // arithmetic mean
	Stdev time.Duration // population standard deviation
	P50   time.Duration // median (perftest's t_typical)
	P90   time.Duration // 90th percentile
	P99   time.Duration // 99th percentile
	P999  time.Duration // 99.9th percentile
}

// Summary computes the digest. It sorts the retained samples in place, so
// call it after measuring; Record may continue afterwards.
func (l *Latencies) Summary() Summary {
	if l.n == 0 {
		return Summary{}
	}
	s := l.buf[:min(l.n, len(l.buf))]
	slices.Sort(s)
	mean := l.sum / float64(l.n)
	variance := max(l.sumSq/float64(l.n)-mean*mean, 0)
	return Summary{
		Count: l.n,
		Min:   l.min,
		Max:   l.max,
		Avg:   time.Duration(math.Round(mean)),
		Stdev: time.Duration(math.Round(math.Sqrt(variance))),
		P50:   Percentile(s, 50),
		P90:   Percentile(s, 90),
		P99:   Percentile(s, 99),
		P999:  Percentile(s, 99.9),
	}
}

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of sorted samples
// by the nearest-rank method: the smallest sample such that at least p
// percent of the samples are less than or equal to it. It returns 0 for
// no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Histogram counts the retained samples in power-of-two nanosecond
// buckets: bucket i holds samples d with 2^(i-1) ≤ d < 2^i ns (bucket 0
// holds d < 1 ns). Trailing empty buckets are trimmed.
func (l *Latencies) Histogram() []int {
	var h [64]int
	top := 0
	for _, d := range l.buf[:min(l.n, len(l.buf))] {
		i := 0
		if d > 0 {
			i = bits.Len64(uint64(d))
		}
		h[i]++
		top = max(top, i+1)
	}
	return slices.Clone(h[:top])
}
