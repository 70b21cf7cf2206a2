package objexp

import "testing"

// TestParseTuneThreshold reads both of tune's threshold lines and fails
// on output without one.
func TestParseTuneThreshold(t *testing.T) {
	for out, want := range map[string]int{
		"     size  sendrecv p50  read p50    faster\n    1 KiB  127.6µs  210.6µs  sendrecv\nthreshold: 256 KiB (READ from this size on loses least; pass --threshold 262144 to objstore serve)\n": 262144,
		"threshold: none found (SEND/RECV everywhere loses least up to the largest size; pass --threshold 1048577 to keep SEND/RECV)\n":                                                            1048577,
	} {
		if got, err := parseTuneThreshold(out); err != nil || got != want {
			t.Errorf("parseTuneThreshold(%q) = %d, %v; want %d", out, got, err, want)
		}
	}
	if _, err := parseTuneThreshold("tune: holder unreachable\n"); err == nil {
		t.Error("output without a threshold parsed")
	}
	if got := tuneSummary("     size  sendrecv p50  read p50    faster\n    1 KiB       127.6µs   210.6µs  sendrecv\n   32 KiB 1µs 2µs sendrecv\nthreshold: x\n"); got != "1 KiB: 127.6µs/210.6µs, 32 KiB: 1µs/2µs" {
		t.Errorf("tuneSummary = %q", got)
	}
}
