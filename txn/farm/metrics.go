package farm

import (
	"github.com/prometheus/client_golang/prometheus"
)

// A node's metrics, read when Prometheus scrapes.
var (
	descTxns = prometheus.NewDesc("rdmakit_farm_transactions",
		"Transactions under way at the node: holding locks here (locked), with COMMIT-BACKUP records not yet truncated (pending).", []string{"state"}, nil)
	descOutcomes = prometheus.NewDesc("rdmakit_farm_outcomes_total",
		"Transactions resolved at the node: installed or released by their coordinator's records, committed or aborted by recovery, refused at LOCK.",
		[]string{"outcome"}, nil)
	descRecords = prometheus.NewDesc("rdmakit_farm_log_records_total",
		"Log records the node's CPU took from its clients' rings.", nil, nil)
	descLockHold = prometheus.NewDesc("rdmakit_farm_max_lock_hold_seconds",
		"The longest any transaction held its locks at the node.", nil, nil)
	descNodeCPU = prometheus.NewDesc("rdmakit_farm_cpu_seconds_total",
		"Time the node's CPU spent on the protocol: LOCK, recovery calls, taking log records.", nil, nil)
)

// collector serves a node's counters.
type collector struct{ n *Node }

// Describe sends the descriptors.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTxns, descOutcomes, descRecords, descLockHold, descNodeCPU} {
		ch <- d
	}
}

// Collect sends the node's counters.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Stats()
	ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, float64(st.Locks), "locked")
	ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, float64(st.Pending), "pending")
	for name, v := range map[string]uint64{"installed": st.Installed, "released": st.Released, "recovered_commit": st.Recovered,
		"recovered_abort": st.RecoverAborts, "lock_refused": st.LockFailures} {
		ch <- prometheus.MustNewConstMetric(descOutcomes, prometheus.CounterValue, float64(v), name)
	}
	ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(st.Records))
	ch <- prometheus.MustNewConstMetric(descLockHold, prometheus.GaugeValue, st.MaxLockHold.Seconds())
	ch <- prometheus.MustNewConstMetric(descNodeCPU, prometheus.CounterValue, st.CPU.Seconds())
}

// Collector implements memnode.MetricsService: the node's counters on
// the memory node's /metrics.
func (n *Node) Collector() prometheus.Collector { return collector{n} }
