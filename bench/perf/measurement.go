package perf

import (
	"time"

	"github.com/rdmakit/rdmakit/bench/stats"
)

// Cell is one point of a measurement matrix.
type Cell struct {
	Op   Op
	Test Test
	Size int // message size in bytes
}

// Stop says when a measurement ends: after Iters operations or, when
// Iters is zero, after Duration.
type Stop struct {
	Iters    int
	Duration time.Duration
}

// Measurement is the outcome of one cell.
type Measurement struct {
	Cell
	// Iters is the number of operations completed.
	Iters int
	// Elapsed is the wall time of the measured operations.
	Elapsed time.Duration
	// Lat digests the per-operation latencies (latency test only): post to
	// completion for one-sided operations, half the round trip for SEND.
	Lat stats.Summary
	// Peak is the best message rate (operations per second) over slices of
	// at least a millisecond (bandwidth test only; the average for
	// shorter runs).
	Peak float64
}

// Rate is the average message rate in operations per second.
func (m *Measurement) Rate() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Iters) / m.Elapsed.Seconds()
}

// Mops is the average message rate in millions of operations per second
// (perftest's MsgRate[Mpps]).
func (m *Measurement) Mops() float64 { return m.Rate() / 1e6 }

// GBps is the average bandwidth in 10⁹ bytes per second.
func (m *Measurement) GBps() float64 { return m.Rate() * float64(m.Size) / 1e9 }

// MBps is the average bandwidth in MiB (2²⁰ bytes) per second, perftest's
// "MB/sec".
func (m *Measurement) MBps() float64 { return m.Rate() * float64(m.Size) / (1 << 20) }

// PeakMBps is the peak bandwidth in MiB per second.
func (m *Measurement) PeakMBps() float64 { return m.Peak * float64(m.Size) / (1 << 20) }
