package main

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// The node's metrics. The soft NIC's counters are read from tcp.Stats when
// Prometheus scrapes: nothing is counted on the data path for them.
var (
	descOps = prometheus.NewDesc("rdmakit_ops_total",
		"Requests the soft NIC served for peers, by opcode.", []string{"opcode"}, nil)
	descBytes = prometheus.NewDesc("rdmakit_bytes_total",
		"Payload bytes the soft NIC served: written, read and delivered.", nil, nil)
	descErrors = prometheus.NewDesc("rdmakit_errors_total",
		"Requests the soft NIC answered with an error status (bad rkey, out of bounds, misaligned atomic, message too long, ...).", nil, nil)
	descRNR = prometheus.NewDesc("rdmakit_rnr_total",
		"Requests answered receiver-not-ready: a SEND or WRITE_WITH_IMM found no posted receive.", nil, nil)
	descWrongPeer = prometheus.NewDesc("rdmakit_wrong_peer_requests_total",
		"Requests dropped unanswered because they did not come from the connected peer of the QP they named (another tenant's QP, or none).", nil, nil)
	descOutstanding = prometheus.NewDesc("rdmakit_outstanding_requests",
		"Send requests posted on the node's own QPs (echoes) and not yet completed.", nil, nil)
	descQPs = prometheus.NewDesc("rdmakit_connected_qps",
		"The node's QPs in RTR or RTS.", nil, nil)
	descPeers = prometheus.NewDesc("rdmakit_peers",
		"Peer devices connected to the soft NIC now.", nil, nil)
	descRefused = prometheus.NewDesc("rdmakit_refused_connections_total",
		"Device connections the soft NIC refused: bad hello, auth token, version or a malformed frame.", nil, nil)
	descConns = prometheus.NewDesc("rdmakit_node_connections",
		"cm connections the node is serving now.", nil, nil)
	descAccepted = prometheus.NewDesc("rdmakit_node_accepted_total",
		"cm connections the node established.", nil, nil)
	descRejected = prometheus.NewDesc("rdmakit_node_rejected_total",
		"cm connection requests the node refused (bad token) or that failed during the exchange.", nil, nil)
	descMemory = prometheus.NewDesc("rdmakit_node_memory_bytes",
		"Bytes of memory the node registered for peers.", nil, nil)
)

// nodeCollector is the prometheus.Collector of a node.
type nodeCollector struct{ n *node }

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOps, descBytes, descErrors, descRNR, descWrongPeer, descOutstanding, descQPs,
		descPeers, descRefused, descConns, descAccepted, descRejected, descMemory} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(descConns, float64(n.active.Load()))
	counter(descAccepted, float64(n.accepted.Load()))
	counter(descRejected, float64(n.rejected.Load()))
	gauge(descMemory, float64(n.cfg.mem))
	st, refused, err := tcp.Stats(n.dev)
	if err != nil {
		return // not a tcp device: no soft-NIC counters
	}
	for op := 1; op < nic.MaxOpcode; op++ {
		name := verbs.Opcode(op).String()
		if v := st.Ops[op]; v > 0 || !strings.HasPrefix(name, "Opcode(") {
			counter(descOps, float64(v), name)
		}
	}
	counter(descBytes, float64(st.Bytes))
	counter(descErrors, float64(st.Errors))
	counter(descRNR, float64(st.RNR))
	counter(descWrongPeer, float64(st.WrongPeer))
	gauge(descOutstanding, float64(st.Outstanding))
	gauge(descQPs, float64(st.ConnectedQPs))
	gauge(descPeers, float64(st.Peers))
	counter(descRefused, float64(refused))
}

// metricsHandler serves the node's metrics and the Go runtime's and
// process's in the Prometheus text format.
func (n *node) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		nodeCollector{n},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("rdmakit node: metrics at /metrics\n"))
	})
	return mux
}
