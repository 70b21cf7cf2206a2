package nic

import (
	"testing"
	"time"
)

// TestSilenceGrace: one budget of grace per response seen, never two in
// a row without one.
func TestSilenceGrace(t *testing.T) {
	const d = time.Second
	var g SilenceGrace
	t0 := time.Unix(1000, 0)
	if !g.Alive(t0, d, 5) {
		t.Fatal("the first silence gets a grace")
	}
	if !g.Alive(t0.Add(d/2), d, 5) {
		t.Fatal("alive within the grace")
	}
	if g.Alive(t0.Add(d), d, 5) {
		t.Fatal("alive after a whole grace with no response")
	}
	if !g.Alive(t0.Add(2*d), d, 6) {
		t.Fatal("a response since the grace began earns a new one")
	}
	if g.Alive(t0.Add(3*d), d, 6) {
		t.Fatal("alive after the second grace with no response")
	}
}
