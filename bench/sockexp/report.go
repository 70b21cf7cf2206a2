package sockexp

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// median is the median of v (the upper one of an even count), NaN for
// none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// spread is (max−min)/median of v in percent, NaN with fewer than two
// values.
func spread(v []float64) float64 {
	if len(v) < 2 {
		return math.NaN()
	}
	return 100 * (slices.Max(v) - slices.Min(v)) / median(v)
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// num is x, or nil (not applicable) for NaN and infinities.
func num(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

// ratio is a/b, NaN when b is zero or either is unknown.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// times formats ratios as "×1.23", "–" for unknown ones.
func times(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("×%.3g", x)
}

// joinRatios is "label1 ×a, label2 ×b".
func joinRatios(labels []string, xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = labels[i] + " " + times(x)
	}
	return strings.Join(parts, ", ")
}
