package stats

import (
	"testing"
	"time"
)

func TestSummaryKnownData(t *testing.T) {
	l := NewLatencies(1000)
	// 1..100 µs, recorded in reverse so sorting matters.
	for i := 100; i >= 1; i-- {
		l.Record(time.Duration(i) * time.Microsecond)
	}
	s := l.Summary()
	us := time.Microsecond
	want := Summary{Count: 100, Min: us, Max: 100 * us, Avg: 50500 * time.Nanosecond,
		P50: 50 * us, P90: 90 * us, P99: 99 * us, P999: 100 * us}
	got := s
	got.Stdev = 0
	if got != want {
		t.Fatalf("summary = %+v, want %+v", got, want)
	}
	// population stdev of 1..100 is sqrt((100²-1)/12) ≈ 28.866 µs
	if d := s.Stdev - 28866*time.Nanosecond; d < -time.Nanosecond || d > time.Nanosecond {
		t.Errorf("stdev = %v", s.Stdev)
	}
}

func TestPercentileEdges(t *testing.T) {
	if Percentile(nil, 50) != 0 {
		t.Error("empty")
	}
	s := []time.Duration{5}
	for _, p := range []float64{0, 50, 100} {
		if Percentile(s, p) != 5 {
			t.Errorf("p%v of one sample", p)
		}
	}
	s = []time.Duration{1, 2, 3, 4}
	if Percentile(s, 0) != 1 || Percentile(s, 25) != 1 || Percentile(s, 26) != 2 || Percentile(s, 100) != 4 {
		t.Error("nearest rank")
	}
}

func TestWrapKeepsExactExtremes(t *testing.T) {
	l := NewLatencies(4)
	for i := 1; i <= 10; i++ {
		l.Record(time.Duration(i))
	}
	s := l.Summary()
	if s.Count != 10 || s.Min != 1 || s.Max != 10 || s.Avg != 6 {
		t.Fatalf("%+v", s)
	}
	if s.P50 < 7 { // retained: 7..10
		t.Errorf("p50 over retained samples = %v", s.P50)
	}
	l.Reset()
	if l.Summary() != (Summary{}) {
		t.Error("reset")
	}
}

func TestHistogram(t *testing.T) {
	l := NewLatencies(16)
	for _, d := range []time.Duration{0, 1, 2, 3, 4, 1000} {
		l.Record(d)
	}
	h := l.Histogram()
	want := []int{1, 1, 2, 1, 0, 0, 0, 0, 0, 0, 1}
	if len(h) != len(want) {
		t.Fatalf("histogram = %v, want %v", h, want)
	}
	for i := range h {
		if h[i] != want[i] {
			t.Fatalf("histogram = %v, want %v", h, want)
		}
	}
}

func TestRecordAllocatesNothing(t *testing.T) {
	l := NewLatencies(8)
	if a := testing.AllocsPerRun(1000, func() { l.Record(time.Microsecond) }); a != 0 {
		t.Errorf("Record allocates %v", a)
	}
}
