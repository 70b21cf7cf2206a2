package replica

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A replica's metrics, read when Prometheus scrapes.
var (
	descBlocks = prometheus.NewDesc("rdmakit_blockstore_blocks",
		"Blocks of the replica's volume (0 before it is created).", nil, nil)
	descBlockSize = prometheus.NewDesc("rdmakit_blockstore_block_size_bytes",
		"Block size of the replica's volume.", nil, nil)
	descBuffers = prometheus.NewDesc("rdmakit_blockstore_buffers_total",
		"PRISM-RS ⟨tag | data⟩ buffers: carved from the region, returned by clients, recycled after quiescence.", []string{"event"}, nil)
	descCalls = prometheus.NewDesc("rdmakit_blockstore_rpc_calls_total",
		"RPC calls the replica's CPU answered, by method.", []string{"method"}, nil)
	descCPU = prometheus.NewDesc("rdmakit_blockstore_cpu_seconds_total",
		"Time the replica's CPU spent: restocking and recycling PRISM-RS buffers (restock), in RPC handlers (rpc).", []string{"part"}, nil)
)

// methodNames name the RPC methods in metrics.
var methodNames = [...]string{MethodInfo: "info", MethodCreate: "create", MethodClaim: "claim",
	MethodReadTag: "read_tag", MethodRead: "read", MethodWrite: "write"}

// collector serves a replica's counters.
type collector struct{ r *Replica }

// Describe sends the descriptors.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBlocks, descBlockSize, descBuffers, descCalls, descCPU} {
		ch <- d
	}
}

// Collect sends the replica's counters.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	var blocks, bs float64
	if v := c.r.vol.Load(); v != nil {
		blocks, bs = float64(v.info.Layout.Blocks), float64(v.info.Layout.BlockSize)
	}
	ch <- prometheus.MustNewConstMetric(descBlocks, prometheus.GaugeValue, blocks)
	ch <- prometheus.MustNewConstMetric(descBlockSize, prometheus.GaugeValue, bs)
	st := c.r.Stats()
	for ev, n := range map[string]uint64{"carved": st.Carved, "returned": st.Returned, "recycled": st.Recycled} {
		ch <- prometheus.MustNewConstMetric(descBuffers, prometheus.CounterValue, float64(n), ev)
	}
	for m, name := range methodNames {
		if name != "" {
			ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(c.r.calls[m].Load()), name)
		}
	}
	ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, c.r.CPU().Seconds(), "restock")
	ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, c.r.RPCTime().Seconds(), "rpc")
}

// Collector implements memnode.MetricsService: the replica's counters
// on the memory node's /metrics.
func (r *Replica) Collector() prometheus.Collector { return collector{r} }

// RPCTime is the time the replica's RPC handlers took (the ABD-over-RPC
// phases, and the setup calls).
func (r *Replica) RPCTime() time.Duration { return time.Duration(r.rpcNanos.Load()) }

// Calls is how many calls of method the replica answered.
func (r *Replica) Calls(method uint16) uint64 {
	if int(method) >= len(r.calls) {
		return 0
	}
	return r.calls[method].Load()
}
