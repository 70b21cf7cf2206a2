package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/bench/perf"
)

// perftestRule separates the blocks of perftest-style output.
var perftestRule = strings.Repeat("-", 87)

// Column headers of the perftest latency and bandwidth reports.
var (
	latColumns = []string{"#bytes", "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]",
		"t_avg[usec]", "t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]"}
	bwColumns = []string{"#bytes", "#iterations", "BW peak[MB/sec]", "BW average[MB/sec]", "MsgRate[Mpps]"}
)

// printPerftestHeader prints the block perftest prints before its table,
// with extra lines at its end.
func printPerftestHeader(w io.Writer, op perf.Op, test perf.Test, cfg *perf.Config, transport string, extra ...string) {
	kind := "Latency"
	if test == perf.BW {
		kind = "BW"
	}
	fmt.Fprintln(w, perftestRule)
	fmt.Fprintf(w, "%*s\n", 20+len(op.Title())+len(kind)+6, op.Title()+" "+kind+" Test")
	fmt.Fprintf(w, " Device         : %s -> %s\n", cfg.Client, cfg.Server)
	fmt.Fprintf(w, " Transport      : %s\n", transport)
	fmt.Fprintf(w, " Connection type: RC\n")
	fmt.Fprintf(w, " Operation      : %v\n", op.Opcode())
	fmt.Fprintf(w, " Poll policy    : %v\n", cfg.Poll)
	fmt.Fprintf(w, " GOMAXPROCS     : %d\n", runtime.GOMAXPROCS(0))
	if test == perf.BW {
		fmt.Fprintf(w, " TX depth       : %d (post lists of %d, last signaled)\n", cfg.Window, cfg.Batch)
	} else if op == perf.Send {
		fmt.Fprintf(w, " Latency        : half the round trip of an echoed SEND\n")
	}
	for _, l := range extra {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, perftestRule)
}

func testColumns(test perf.Test) []string {
	if test == perf.BW {
		return bwColumns
	}
	return latColumns
}

// printPerftestColumns prints the column header line.
func printPerftestColumns(w io.Writer, test perf.Test) {
	printPerftestLine(w, test, testColumns(test))
}

// printPerftestLine prints values left-aligned under the test's columns.
func printPerftestLine(w io.Writer, test perf.Test, vals []string) {
	var b strings.Builder
	for i, c := range testColumns(test) {
		fmt.Fprintf(&b, " %-*s", colWidth(c), vals[i])
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
}

func colWidth(header string) int { return max(len(header), 8) }

// printPerftestRow prints one measurement under the column header.
func printPerftestRow(w io.Writer, m *perf.Measurement) {
	var vals []string
	if m.Test == perf.BW {
		vals = []string{fmt.Sprint(m.Size), fmt.Sprint(m.Iters),
			fmt.Sprintf("%.2f", m.PeakMBps()), fmt.Sprintf("%.2f", m.MBps()), fmt.Sprintf("%.6f", m.Mops())}
	} else {
		l := &m.Lat
		f := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e3) }
		vals = []string{fmt.Sprint(m.Size), fmt.Sprint(m.Iters), f(l.Min), f(l.Max), f(l.P50),
			f(l.Avg), f(l.Stdev), f(l.P99), f(l.P999)}
	}
	printPerftestLine(w, m.Test, vals)
}
