package sockexp

import (
	"fmt"
	"math"
	"strings"

	"github.com/rdmakit/rdmakit/bench"
	"github.com/rdmakit/rdmakit/sock"
)

var isolationColumns = []bench.Column{
	{Name: "system"}, {Name: "setup"}, {Name: "load"},
	{Name: "p50", Unit: "µs"}, {Name: "p99", Unit: "µs"}, {Name: "p999", Unit: "µs"},
	{Name: "spread", Unit: "%"}, {Name: "samples"},
	{Name: "bulk", Unit: "GB/s"}, {Name: "vs_alone", Unit: "×"}, {Name: "partitions"},
}

// isoStat is the medians of a row's rounds.
type isoStat struct {
	p50, p99, p999, spread, gbps float64 // µs, spread in % of p99, GB/s
	count                        int
	// parts is the partitions column: the latency connection's, then the
	// bulk connection's, "–" for connections that are not sock's.
	parts string
}

// stat summarises the samples of k; ok is false without any.
func (u *isoRun) stat(k isoKey) (isoStat, bool) {
	ss := u.samples[k]
	if len(ss) == 0 {
		return isoStat{}, false
	}
	var p50, p99, p999, gbps []float64
	var st isoStat
	for _, s := range ss {
		p50 = append(p50, us(s.p50))
		p99 = append(p99, us(s.p99))
		p999 = append(p999, us(s.p999))
		gbps = append(gbps, s.gbps)
		st.count += s.count
	}
	st.p50, st.p99, st.p999, st.spread, st.gbps = median(p50), median(p99), median(p999), spread(p99), median(gbps)
	if k.load != loadBulk {
		st.gbps = math.NaN()
	}
	st.parts = partName(ss[0].latPart)
	if k.load == loadBulk {
		st.parts += "/" + partName(ss[0].bulkPart)
	}
	return st, true
}

// partName is a partition's number, "–" for none.
func partName(p int) string {
	if p < 0 {
		return "–"
	}
	return fmt.Sprint(p)
}

// vsAlone is the p99 of setup under load divided by its p99 alone, NaN
// when either is missing.
func (u *isoRun) vsAlone(setup string, load isoLoad) float64 {
	st, ok := u.stat(isoKey{setup, load})
	alone, aok := u.stat(isoKey{setup, loadAlone})
	if !ok || !aok {
		return math.NaN()
	}
	return ratio(st.p99, alone.p99)
}

// result is the run's table and notes.
func (u *isoRun) result() *bench.Result {
	var nets []network
	label := map[string]string{}
	for _, s := range u.setups {
		nets = append(nets, s.net)
		label[s.name] = s.net.label()
	}
	r := &bench.Result{Name: "sock-isolation",
		Title:   "Isolation: a 64 B ping-pong flow alone, next to a 1 MiB bulk flow, next to idle connections",
		Columns: isolationColumns, Meta: bench.Meta{Transport: transports(nets)}}
	for _, k := range u.order {
		st, _ := u.stat(k)
		r.AddRow(label[k.setup], k.setup, u.loadName(k.load), st.p50, st.p99, st.p999, num(st.spread), st.count,
			num(st.gbps), num(u.vsAlone(k.setup, k.load)), st.parts)
	}
	r.Notes = append(u.notes, u.ratioNotes(label)...)
	r.Notes = append(r.Notes,
		fmt.Sprintf("Each setup's server is one `rdmakit sock serve --app mux` process: the first byte of a connection picks echo or sink. "+
			"The latency flow is one goroutine of the experiment's process writing %d B and reading them back (io.ReadFull), one round trip at a time, "+
			"timed by time.Now into a preallocated buffer; p50, p99 and p99.9 (p999) are its round trips'. "+
			"The bulk flow is a second connection from the same process to the same server (the same sock.Dialer, so the same link), one goroutine "+
			"writing %d MiB per Write without pause, each Write a sink batch the server reads, discards and acknowledges with a byte; "+
			"bulk is the bytes acknowledged while the latency flow was measured over that time (GB/s, 10⁹ bytes per second). "+
			"The idle load is %d connections opened before the latency flow's, each having made one %d B round trip, held open and silent.",
			isoMsgSize, isoBulkSize>>20, u.idle, isoMsgSize),
		fmt.Sprintf("Every point uses fresh connections and runs %v after a warm-up of a tenth of it with its load already running; %d round(s): "+
			"every figure is the median of the rounds, spread is (max−min)/median of p99. vs_alone is p99 divided by the same setup's p99 alone "+
			"(acceptance: at most ×%g next to the bulk flow with slicing and batch limits on).", u.pointTime, u.rounds, isoAcceptance),
		fmt.Sprintf("The sock setups are sock/shm in Direct mode, both sides configured from the listener's URI query: \"1 partition, slicing on\" "+
			"is partitions=1 with the defaults (MTU %d KiB, %d records per turn); \"slicing off\" adds slicing=0&batch=-1 on both sides "+
			"(sock.Config{NoSlicing: true, BatchLimit: -1}: each Write goes as records of a quarter ring, %d KiB, and keeps the partition to its end); "+
			"\"2 partitions\" is partitions=2; \"default\" is the zero sock.Config (%d partitions). The partitions column is the latency "+
			"connection's partition, then the bulk connection's ((*sock.Conn).Partition(), in the first round; every round checked).",
			sock.DefaultMTU>>10, sock.DefaultBatchLimit, sock.DefaultRingSize/4>>10, sock.DefaultPartitions))
	return r
}

// ratioNotes says, for each setup with a bulk or idle load, how much the
// load moved the latency flow's p99, in words.
func (u *isoRun) ratioNotes(label map[string]string) []string {
	var notes []string
	for _, k := range u.order {
		if k.load == loadAlone {
			continue
		}
		st, _ := u.stat(k)
		alone, ok := u.stat(isoKey{k.setup, loadAlone})
		if !ok {
			continue
		}
		x := u.vsAlone(k.setup, k.load)
		var b strings.Builder
		fmt.Fprintf(&b, "%s, %s: the latency flow's p99 next to %s is %.2f µs against %.2f µs alone, %s",
			label[k.setup], k.setup, u.loadName(k.load), st.p99, alone.p99, times(x))
		if k.load == loadBulk {
			verdict := "within"
			if !(x <= isoAcceptance) {
				verdict = "above"
			}
			fmt.Fprintf(&b, " (%s the ×%g bound), while the bulk flow moved %.2f GB/s", verdict, isoAcceptance, st.gbps)
			if where := placedWords(st.parts); where != "" {
				b.WriteString("; " + where)
			}
		}
		b.WriteString(".")
		notes = append(notes, b.String())
	}
	return notes
}

// placedWords says where the latency and bulk connections were, from a
// partitions column "L/B"; "" when not sock's.
func placedWords(parts string) string {
	lat, bulk, ok := strings.Cut(parts, "/")
	if !ok || lat == "–" || bulk == "–" {
		return ""
	}
	if lat == bulk {
		return "both connections in partition " + lat
	}
	return fmt.Sprintf("the latency connection in partition %s, the bulk connection in partition %s", lat, bulk)
}
