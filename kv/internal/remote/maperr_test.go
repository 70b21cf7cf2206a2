package remote

import "testing"

// TestMapErrNilAllocatesNothing: the store clients map every operation's
// error, nil included, on the hot path.
func TestMapErrNilAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = MapErr(nil, false) }); n != 0 {
		t.Fatalf("MapErr(nil) allocates %v times", n)
	}
}
