package sockexp

import (
	"math"
	"testing"
)

// Rounds are summarised by their median (the upper one of an even
// count) and spread, (max−min)/median in percent; one round has no
// spread, no rounds no median; a ratio to zero or an unknown is unknown.
func TestMedianSpread(t *testing.T) {
	if m, s := median([]float64{3, 1, 2}), spread([]float64{3, 1, 2}); m != 2 || s != 100 {
		t.Errorf("median %v, spread %v; want 2, 100", m, s)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 3 {
		t.Errorf("median of four: %v", m)
	}
	v := []float64{5, 4}
	median(v)
	if v[0] != 5 {
		t.Error("median sorted its argument")
	}
	if !math.IsNaN(spread([]float64{7})) || !math.IsNaN(median(nil)) {
		t.Error("spread of one round or median of none is not NaN")
	}
	if num(ratio(1, 0)) != nil || num(ratio(math.NaN(), 1)) != nil || num(ratio(1, 4)) != 0.25 {
		t.Error("ratio")
	}
	if got := joinRatios([]string{"a", "b"}, []float64{1.5, math.NaN()}); got != "a ×1.5, b –" {
		t.Errorf("joinRatios: %q", got)
	}
}
