package peers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Percentile is one percentile line of a peer's report.
type Percentile struct {
	// Rank is the percentile rank, 0–100 (e.g. 99.9).
	Rank float64
	// Value is the latency at that rank.
	Value time.Duration
}

// SockperfReport is what one sockperf ping-pong client printed for its
// (first) server. Its durations are as printed: round trips when FullRTT,
// one-way latencies (half the round trip) otherwise.
type SockperfReport struct {
	// FullRTT is true when sockperf ran with --full-rtt and printed
	// avg-rtt; false when it printed avg-latency, which is RTT/2.
	FullRTT bool
	// Avg and Stdev are the mean and standard deviation.
	Avg, Stdev time.Duration
	// Min and Max are the fastest and slowest observations.
	Min, Max time.Duration
	// Percentiles are the percentile lines, highest rank first.
	Percentiles []Percentile
	// Observations is the number of timed round trips.
	Observations int
	// ValidRunTime is the measured span, after warm-up.
	ValidRunTime time.Duration
	// Sent and Received count the messages in the measured span.
	Sent, Received int
	// Dropped, Duplicated and OutOfOrder count anomalies (TCP: zero).
	Dropped, Duplicated, OutOfOrder int
}

// Percentile returns the printed value at rank (e.g. 50, 99, 99.9).
func (r *SockperfReport) Percentile(rank float64) (time.Duration, bool) {
	for _, p := range r.Percentiles {
		if p.Rank == rank {
			return p.Value, true
		}
	}
	return 0, false
}

// ParseSockperf parses the combined output of `sockperf ping-pong` (3.x).
// It returns an error naming sockperf's complaint when there is no
// statistics summary: sockperf exits 0 even when it cannot connect or
// rejects its arguments, so the summary is the only proof of a run.
func ParseSockperf(out []byte) (*SockperfReport, error) {
	var (
		r         SockperfReport
		seenStats bool // "Printing statistics" seen
		seenAvg   bool
		complaint string
	)
	for raw := range strings.SplitSeq(string(out), "\n") {
		line := strings.TrimSpace(stripANSI(raw))
		line = strings.TrimSpace(strings.TrimPrefix(line, "sockperf:"))
		switch {
		case strings.HasPrefix(line, "ERROR") || strings.Contains(line, "Invalid"):
			if complaint == "" {
				complaint = line
			}
		case strings.HasPrefix(line, "========= Printing statistics"):
			if seenStats {
				// Several servers: keep the first one's figures.
				return r.finish(seenAvg, complaint)
			}
			seenStats = true
		case strings.HasPrefix(line, "[Valid Duration]"):
			kv := keyValues(strings.TrimPrefix(line, "[Valid Duration]"))
			if v, ok := kv["RunTime"]; ok {
				sec, err := strconv.ParseFloat(strings.TrimSuffix(v, " sec"), 64)
				if err == nil && sec >= 0 && sec < 1e9 {
					r.ValidRunTime = time.Duration(sec * float64(time.Second))
				}
			}
			r.Sent = atoiOr(kv["SentMessages"], r.Sent)
			r.Received = atoiOr(kv["ReceivedMessages"], r.Received)
		case strings.HasPrefix(line, "====> avg-rtt=") || strings.HasPrefix(line, "====> avg-latency="):
			r.FullRTT = strings.HasPrefix(line, "====> avg-rtt=")
			_, rest, _ := strings.Cut(line, "> avg-")
			_, rest, _ = strings.Cut(rest, "=") // past "rtt=" or "latency="
			avg, rest, _ := strings.Cut(rest, " ")
			d, err := usec(avg)
			if err != nil {
				return nil, fmt.Errorf("sockperf: average %q: %w", avg, err)
			}
			r.Avg, seenAvg = d, true
			// "(std-dev=12.074)"; sockperf ≥ 3.8 adds ", mean-ad=…" etc.
			if _, sd, ok := strings.Cut(rest, "std-dev="); ok {
				if i := strings.IndexAny(sd, ",)"); i >= 0 {
					sd = sd[:i]
				}
				if d, err := usec(sd); err == nil {
					r.Stdev = d
				}
			}
		case strings.HasPrefix(line, "# dropped messages"):
			kv := keyValues(strings.ReplaceAll(line, "# ", ""))
			r.Dropped = atoiOr(kv["dropped messages"], 0)
			r.Duplicated = atoiOr(kv["duplicated messages"], 0)
			r.OutOfOrder = atoiOr(kv["out-of-order messages"], 0)
		case strings.HasPrefix(line, "Total ") && strings.Contains(line, " observations"):
			f := strings.Fields(line)
			r.Observations = atoiOr(f[1], 0)
		case strings.HasPrefix(line, "---> "):
			name, val, ok := strings.Cut(strings.TrimPrefix(line, "---> "), "=")
			if !ok {
				continue
			}
			name, val = strings.TrimSpace(name), strings.TrimSpace(val)
			d, err := usec(val)
			if err != nil {
				return nil, fmt.Errorf("sockperf: %s: %w", name, err)
			}
			switch {
			case name == "<MAX> observation":
				r.Max = d
			case name == "<MIN> observation":
				r.Min = d
			case strings.HasPrefix(name, "percentile "):
				rank, err := strconv.ParseFloat(strings.TrimPrefix(name, "percentile "), 64)
				if err != nil || !(rank >= 0 && rank <= 100) {
					return nil, fmt.Errorf("sockperf: bad percentile line %q", line)
				}
				r.Percentiles = append(r.Percentiles, Percentile{Rank: rank, Value: d})
			}
		}
	}
	return r.finish(seenAvg, complaint)
}

// finish checks that a summary was found.
func (r *SockperfReport) finish(seenAvg bool, complaint string) (*SockperfReport, error) {
	switch {
	case !seenAvg && complaint != "":
		return nil, fmt.Errorf("sockperf: %s", complaint)
	case !seenAvg:
		return nil, errors.New("sockperf: no statistics in output")
	case r.Observations == 0:
		return nil, errors.New("sockperf: no observations")
	}
	return r, nil
}

// keyValues splits "A=1; B=2 sec; C=3" or "a = 1; b = 2" into a map with
// trimmed keys and values.
func keyValues(s string) map[string]string {
	m := map[string]string{}
	for part := range strings.SplitSeq(s, ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// atoiOr parses a non-negative decimal integer, or returns def.
func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return def
	}
	return n
}
