package peers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UCXReport is the summary printed by a ucx_perftest client (1.x, plain
// table format): the figures of its "Final:" row. Latencies are as
// printed: half the round trip for ping-pong tests (*_lat), the whole
// operation for the others.
type UCXReport struct {
	// Metric is the table's latency heading: "latency" for latency tests,
	// "overhead" for bandwidth tests (time per posted operation).
	Metric string
	// PercentileRank is the rank of Typical (ucx_perftest -R, default 50).
	PercentileRank float64
	// Iterations is the number of timed iterations.
	Iterations int64
	// Typical is the latency at PercentileRank over the last 2048
	// iterations (ucx_perftest keeps a ring of that many samples).
	Typical time.Duration
	// Avg is the overall mean latency.
	Avg time.Duration
	// BandwidthMiBps is the overall payload bandwidth in MiB/s
	// (ucx_perftest's "MB/s" is 2^20 bytes per second).
	BandwidthMiBps float64
	// MsgRate is the overall message rate in messages per second.
	MsgRate float64
	// Errors are the UCX ERROR, assertion and usage messages printed.
	Errors []string
}

// ParseUCXPerftest parses the combined output of a ucx_perftest client.
// The summary is the row starting "Final:", or failing that the last row
// of eight figures (as printed with -f). Without a summary it returns an
// error carrying the first error message UCX printed.
func ParseUCXPerftest(out []byte) (*UCXReport, error) {
	var (
		r        UCXReport
		final    []string // the figures of the summary row
		sawFinal bool     // final came from a "Final:" row
	)
	for raw := range strings.SplitSeq(string(out), "\n") {
		line := strings.TrimSpace(raw)
		if msg, ok := ucxError(line); ok {
			r.Errors = append(r.Errors, msg)
			continue
		}
		if strings.HasPrefix(line, "|") {
			parseUCXHeader(line, &r)
			continue
		}
		f := strings.Fields(line)
		isFinal := len(f) > 0 && f[0] == "Final:"
		switch {
		case isFinal:
			f = f[1:]
		case len(f) > 1 && f[0] == "[thread":
			f = f[2:]
		}
		if len(f) != 8 || !allNumbers(f) {
			continue
		}
		if isFinal || !sawFinal {
			final, sawFinal = f, isFinal
		}
	}
	if final == nil {
		if len(r.Errors) > 0 {
			return nil, fmt.Errorf("ucx_perftest: %s", r.Errors[0])
		}
		return nil, errors.New("ucx_perftest: no summary row in output")
	}
	// final: iterations, typical, average (last interval), overall,
	// bandwidth average, overall, message rate average, overall.
	iters, err := strconv.ParseFloat(final[0], 64)
	if err != nil || iters < 0 || iters > 1e18 {
		return nil, fmt.Errorf("ucx_perftest: iterations %q", final[0])
	}
	r.Iterations = int64(iters)
	if r.Typical, err = usec(final[1]); err != nil {
		return nil, fmt.Errorf("ucx_perftest: typical latency: %w", err)
	}
	if r.Avg, err = usec(final[3]); err != nil {
		return nil, fmt.Errorf("ucx_perftest: average latency: %w", err)
	}
	r.BandwidthMiBps, _ = strconv.ParseFloat(final[5], 64)
	r.MsgRate, _ = strconv.ParseFloat(final[7], 64)
	if r.PercentileRank == 0 {
		r.PercentileRank = 50
	}
	return &r, nil
}

// parseUCXHeader takes the metric and percentile rank from a table
// heading line: "|  latency (usec) |" and "| 50.0%ile |".
func parseUCXHeader(line string, r *UCXReport) {
	for cell := range strings.SplitSeq(line, "|") {
		cell = strings.TrimSpace(cell)
		if m, ok := strings.CutSuffix(cell, " (usec)"); ok && r.Metric == "" {
			r.Metric = strings.TrimSpace(m)
		}
		if p, ok := strings.CutSuffix(cell, "%ile"); ok {
			if rank, err := strconv.ParseFloat(p, 64); err == nil && rank > 0 && rank <= 100 {
				r.PercentileRank = rank
			}
		}
	}
}

// ucxError recognises UCX's error lines and returns their message:
// "[ts] [host:pid:0] file.c:N UCX  ERROR msg", assertion failures and
// "Invalid option" complaints.
func ucxError(line string) (string, bool) {
	if _, msg, ok := strings.Cut(line, "UCX  ERROR "); ok {
		return strings.TrimSpace(msg), true
	}
	if i := strings.Index(line, "Assertion `"); i >= 0 {
		return strings.TrimSpace(line[i:]), true
	}
	return "", false
}

// allNumbers reports whether every field parses as a float.
func allNumbers(f []string) bool {
	for _, s := range f {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return false
		}
	}
	return true
}
