package objexp

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// fullRounds is how often a full run measures every point; the medians
// of the rounds are reported.
const fullRounds = 3

// rounds is the number of rounds of a run.
func rounds(quick bool) int {
	if quick {
		return 1
	}
	return fullRounds
}

// median of xs (NaN for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is (max−min)/median of xs in percent: how far the rounds
// disagree.
func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := median(xs)
	if m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m * 100
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// num is x for a table cell: nil (printed "—", JSON null) when unknown.
func num(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

// ratio is a/b, NaN when either is missing.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

// times formats a ratio as "3.2×" ("n/a" when missing).
func times(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", x)
}

// sizeLabel is a size in KiB or MiB.
func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
