package peers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSockperfRTT(t *testing.T) {
	r, err := ParseSockperf(readTestdata(t, "sockperf_tcp_rtt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.FullRTT {
		t.Error("FullRTT = false for avg-rtt output")
	}
	want := SockperfReport{
		FullRTT: true, Avg: 81692 * time.Nanosecond, Stdev: 54353 * time.Nanosecond,
		Min: 24386 * time.Nanosecond, Max: 2917510 * time.Nanosecond,
		Observations: 6732, ValidRunTime: 550 * time.Millisecond, Sent: 6732, Received: 6732,
	}
	if r.Avg != want.Avg || r.Stdev != want.Stdev || r.Min != want.Min || r.Max != want.Max ||
		r.Observations != want.Observations || r.ValidRunTime != want.ValidRunTime ||
		r.Sent != want.Sent || r.Received != want.Received {
		t.Errorf("report = %+v\nwant   %+v", *r, want)
	}
	if len(r.Percentiles) != 8 {
		t.Errorf("%d percentiles, want 8", len(r.Percentiles))
	}
	for rank, want := range map[float64]time.Duration{50: 76323 * time.Nanosecond, 99: 185085 * time.Nanosecond, 99.9: 577431 * time.Nanosecond} {
		if got, ok := r.Percentile(rank); !ok || got != want {
			t.Errorf("p%v = %v, %v; want %v", rank, got, ok, want)
		}
	}
	if _, ok := r.Percentile(12); ok {
		t.Error("Percentile(12) found")
	}
	res := sockperfResult(r, "cmd", 14)
	if res.RTTP50 != 76323*time.Nanosecond || res.RTTAvg != r.Avg || res.Samples != 6732 {
		t.Errorf("result = %+v", res)
	}
}

func TestParseSockperfOneWay(t *testing.T) {
	r, err := ParseSockperf(readTestdata(t, "sockperf_tcp_latency.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.FullRTT {
		t.Error("FullRTT = true for avg-latency output")
	}
	if r.Avg != 35032*time.Nanosecond || r.Observations != 22112 {
		t.Errorf("avg %v, observations %d", r.Avg, r.Observations)
	}
	// Without --full-rtt sockperf prints RTT/2: the result doubles it.
	res := sockperfResult(r, "cmd", 14)
	if res.RTTAvg != 2*35032*time.Nanosecond || res.RTTP50 != 2*34366*time.Nanosecond || res.RTTP99 != 2*54285*time.Nanosecond {
		t.Errorf("RTT avg %v p50 %v p99 %v", res.RTTAvg, res.RTTP50, res.RTTP99)
	}
}

func TestParseSockperfErrors(t *testing.T) {
	for file, want := range map[string]string{
		"sockperf_msgsize_error.txt": "Invalid message size: 8 (min: 14)",
		"sockperf_refused.txt":       "Connection refused",
	} {
		_, err := ParseSockperf(readTestdata(t, file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", file, err, want)
		}
	}
	for _, in := range []string{"", "sockperf: ====> avg-rtt=1.0 (std-dev=0.1)\n", "garbage\n\x1b[", "sockperf: ====> avg-rtt=-5 (std-dev=1)"} {
		if _, err := ParseSockperf([]byte(in)); err == nil {
			t.Errorf("ParseSockperf(%q) = nil error", in)
		}
	}
}

func TestParseSockperfExtendedStats(t *testing.T) {
	// sockperf ≥ 3.8 prints more dispersion figures after std-dev.
	out := strings.ReplaceAll(string(readTestdata(t, "sockperf_tcp_latency.txt")),
		"(std-dev=12.074)", "(std-dev=12.074, mean-ad=3.1, median-ad=2.0, siqr=1.5, cv=0.3, std-error=0.01, 99.0% ci=[34.9, 35.1])")
	r, err := ParseSockperf([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdev != 12074*time.Nanosecond || r.Avg != 35032*time.Nanosecond {
		t.Errorf("avg %v stdev %v", r.Avg, r.Stdev)
	}
}

func TestParseSockperfFirstServer(t *testing.T) {
	one := string(readTestdata(t, "sockperf_tcp_rtt.txt"))
	_, stats, _ := strings.Cut(one, "========= Printing statistics")
	two := strings.ReplaceAll(one+"sockperf: ========= Printing statistics"+stats, "avg-rtt=81.692", "avg-rtt=99.000")
	r, err := ParseSockperf([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	if r.Avg != 99*time.Microsecond {
		t.Errorf("avg %v, want the first server's 99µs", r.Avg)
	}
	if len(r.Percentiles) != 8 {
		t.Errorf("%d percentiles, want 8 of the first server", len(r.Percentiles))
	}
}

func TestParseUCXPerftest(t *testing.T) {
	us := func(f float64) time.Duration { return time.Duration(f*1e3 + 0.5) }
	cases := []struct {
		file          string
		metric        string
		iters         int64
		typical, avg  time.Duration
		bw, rate      float64
		test          string
		rtt, rttAvg   time.Duration
		pingPongValue bool
	}{
		{"ucx_am_lat_tcp.txt", "latency", 20000, us(5.697), us(5.861), 1.30, 170630, "ucp_am_lat", us(11.394), us(11.722), true},
		{"ucx_am_lat_posix.txt", "latency", 100000, us(0.165), us(0.179), 42.62, 5585814, "ucp_am_lat", us(0.330), us(0.358), true},
		{"ucx_get_posix.txt", "latency", 100000, us(0.030), us(0.038), 198.27, 25987014, "ucp_get", us(0.030), us(0.038), false},
		{"ucx_cswap_posix.txt", "latency", 100000, us(0.050), us(0.039), 194.14, 25446242, "ucp_cswap", us(0.050), us(0.039), false},
		{"ucx_get_tcp.txt", "latency", 2000, us(1112.650), us(1032.223), 0.01, 969, "ucp_get", us(1112.650), us(1032.223), false},
		{"ucx_put_bw_posix.txt", "overhead", 100000, us(0.080), us(0.084), 46703.34, 11956056, "ucp_put_bw", 0, 0, false},
		{"ucx_final_only.txt", "latency", 20000, us(0.065), us(0.073), 104.29, 13670020, "ucp_put_lat", us(0.130), us(0.146), true},
	}
	for _, c := range cases {
		r, err := ParseUCXPerftest(readTestdata(t, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if r.Metric != c.metric || r.Iterations != c.iters || r.Typical != c.typical || r.Avg != c.avg ||
			r.BandwidthMiBps != c.bw || r.MsgRate != c.rate || r.PercentileRank != 50 || len(r.Errors) != 0 {
			t.Errorf("%s: report %+v", c.file, *r)
		}
		res := ucxResult(r, UCXOptions{Test: c.test, TLS: "posix", Size: 8}, "cmd")
		if res.PingPong != c.pingPongValue || res.RTT != c.rtt || res.RTTAvg != c.rttAvg || res.Latency != c.typical {
			t.Errorf("%s: result RTT %v avg %v ping-pong %v", c.file, res.RTT, res.RTTAvg, res.PingPong)
		}
	}
}

func TestParseUCXPerftestErrors(t *testing.T) {
	for file, want := range map[string]string{
		"ucx_bogus_tls.txt":    "no usable transports/devices",
		"ucx_cma_am_abort.txt": "Assertion `max_am_header",
		"ucx_atomic_size.txt":  "Atomic size should be either 32 or 64 bit",
	} {
		_, err := ParseUCXPerftest(readTestdata(t, file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", file, err, want)
		}
	}
	for _, in := range []string{"", "Final: 1 2 3", "Final: 1 2 3 4 5 6 7 x", "Final: 1 -2 3 4 5 6 7 8", "Final: 1 NaN 3 4 5 6 7 8"} {
		if _, err := ParseUCXPerftest([]byte(in)); err == nil {
			t.Errorf("ParseUCXPerftest(%q) = nil error", in)
		}
	}
}

func TestParseUCXPercentileRank(t *testing.T) {
	out := "|    Stage     | # iterations | 99.0%ile | average |\nFinal: 10 1.5 2 2 0 0 1 1\n"
	r, err := ParseUCXPerftest([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.PercentileRank != 99 || r.Typical != 1500*time.Nanosecond {
		t.Errorf("rank %v typical %v", r.PercentileRank, r.Typical)
	}
}

func TestUCXPingPong(t *testing.T) {
	for test, want := range map[string]bool{"ucp_am_lat": true, "ucp_put_lat": true, "tag_lat": true, "ucp_get": false, "ucp_cswap": false, "ucp_am_bw": false} {
		if UCXPingPong(test) != want {
			t.Errorf("UCXPingPong(%q) = %v", test, !want)
		}
	}
}

func TestListensOn(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1146 1 0 100 0 0 10 0
   1: 0100007F:5BB0 0100007F:825C 06 00000000:00000000 03:00000CF0 00000000     0        0 0 3 0
   2: 0100007F:825C 0100007F:5BB0 01 00000000:00000000 03:00000CF0 00000000     0        0 0 3 0
`)
	for port, want := range map[int]bool{0x07E8: true, 0x5BB0: false, 0x825C: false, 80: false} {
		if got := listensOn(table, port); got != want {
			t.Errorf("listensOn(%d) = %v", port, got)
		}
	}
}

func TestStripANSI(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[2;35m====> avg-rtt=1\x1b[0m": "====> avg-rtt=1",
		"plain":                            "plain",
		"\x1b":                             "",
		"a\x1b[":                           "a",
		"a\x1bb":                           "ab",
	} {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUsec(t *testing.T) {
	for in, want := range map[string]time.Duration{"0.075": 75, "5.517": 5517, "1112.650": 1112650, "0": 0} {
		if got, err := usec(in); err != nil || got != want {
			t.Errorf("usec(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "NaN", "Inf", "1e300", "x", ""} {
		if _, err := usec(in); err == nil {
			t.Errorf("usec(%q) accepted", in)
		}
	}
}
