package stores

import (
	"github.com/prometheus/client_golang/prometheus"
)

// A store node's metrics, from its server's NodeStats when Prometheus
// scrapes.
var (
	descKeys = prometheus.NewDesc("rdmakit_kv_keys",
		"Keys with a value on the node.", []string{"store"}, nil)
	descSlots = prometheus.NewDesc("rdmakit_kv_slots",
		"Index slots (PRISM-KV) or entries (Pilaf) of the node.", []string{"store"}, nil)
	descSlotsFree = prometheus.NewDesc("rdmakit_kv_slots_free",
		"Index slots or entries that can take a new key.", []string{"store"}, nil)
	descMemory = prometheus.NewDesc("rdmakit_kv_memory_bytes",
		"Bytes of the node's memory for items (extents, item buffers, blocks).", []string{"store"}, nil)
	descMemoryFree = prometheus.NewDesc("rdmakit_kv_memory_free_bytes",
		"Bytes of item memory not handed out.", []string{"store"}, nil)
	descNodeOps = prometheus.NewDesc("rdmakit_kv_node_ops_total",
		"What the node's CPU served, by kind (Pilaf's put and delete RPCs, RACE's memory, PRISM-KV's recycled items). One-sided operations are in rdmakit_ops_total.", []string{"store", "op"}, nil)
	descCPU = prometheus.NewDesc("rdmakit_kv_node_cpu_seconds_total",
		"Time the node's CPU spent on the store.", []string{"store"}, nil)
)

// collector serves a store node's NodeStats.
type collector struct {
	name string
	srv  Server
}

// Describe sends the descriptors.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKeys, descSlots, descSlotsFree, descMemory, descMemoryFree, descNodeOps, descCPU} {
		ch <- d
	}
}

// Collect sends the node's counters; one a design cannot know (-1) is
// left out.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.NodeStats()
	gauge := func(d *prometheus.Desc, v int64) {
		if v >= 0 {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), c.name)
		}
	}
	gauge(descKeys, st.Keys)
	gauge(descSlots, st.Slots)
	gauge(descSlotsFree, st.SlotsFree)
	gauge(descMemory, st.Memory)
	gauge(descMemoryFree, st.MemoryFree)
	for op, v := range st.Ops {
		ch <- prometheus.MustNewConstMetric(descNodeOps, prometheus.CounterValue, float64(v), c.name, op)
	}
	ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, c.srv.CPU().Seconds(), c.name)
}

// Collector serves the store's counters on the node's /metrics
// (memnode.MetricsService).
func (s *service) Collector() prometheus.Collector { return collector{name: s.layout, srv: s.srv} }
