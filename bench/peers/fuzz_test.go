package peers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addTestdata seeds f with the captured outputs whose names start with
// prefix.
func addTestdata(f *testing.F, prefix string) {
	names, err := filepath.Glob(filepath.Join("testdata", prefix+"*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseSockperf(f *testing.F) {
	addTestdata(f, "sockperf_")
	f.Add([]byte("sockperf: ====> avg-latency=1e308 (std-dev=\n---> percentile 1e9 = 1\nTotal  observations"))
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseSockperf(out)
		if err != nil {
			if r != nil {
				t.Fatal("report with error")
			}
			return
		}
		if r.Observations <= 0 || r.Avg < 0 || r.Min < 0 || r.Max < 0 {
			t.Fatalf("implausible report %+v", *r)
		}
		for _, p := range r.Percentiles {
			if p.Rank < 0 || p.Rank > 100 || p.Value < 0 {
				t.Fatalf("bad percentile %+v", p)
			}
		}
		res := sockperfResult(r, "cmd", SockperfMinMsgSize)
		if res.RTTAvg < r.Avg {
			t.Fatalf("RTT avg %v below printed avg %v", res.RTTAvg, r.Avg)
		}
	})
}

func FuzzParseUCXPerftest(f *testing.F) {
	addTestdata(f, "ucx_")
	f.Add([]byte("[thread 0] 1 2 3 4 5 6 7 8\nFinal:\n|x (usec)|0.0%ile|\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseUCXPerftest(out)
		if err != nil {
			if r != nil {
				t.Fatal("report with error")
			}
			return
		}
		if r.Iterations < 0 || r.Typical < 0 || r.Avg < 0 || r.PercentileRank <= 0 || r.PercentileRank > 100 {
			t.Fatalf("implausible report %+v", *r)
		}
		for _, test := range []string{"ucp_am_lat", "ucp_get", "ucp_am_bw"} {
			res := ucxResult(r, UCXOptions{Test: test}, "cmd")
			if res.RTT < 0 || (res.PingPong && res.RTT != 2*r.Typical) {
				t.Fatalf("%s: RTT %v for typical %v", test, res.RTT, r.Typical)
			}
		}
		for _, e := range r.Errors {
			if strings.Contains(e, "\n") {
				t.Fatalf("multi-line error %q", e)
			}
		}
	})
}
