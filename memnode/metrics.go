package memnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// The server's metrics. The soft NIC's counters are read from tcp.Stats
// when Prometheus scrapes: nothing is counted on the data path for them.
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
		"Send requests posted on the node's own QPs (echoes, probes) and not yet completed.", nil, nil)
	descQPs = prometheus.NewDesc("rdmakit_connected_qps",
		"The node's QPs in RTR or RTS.", nil, nil)
	descPeers = prometheus.NewDesc("rdmakit_peers",
		"Peer devices connected to the soft NIC now.", nil, nil)
	descRefused = prometheus.NewDesc("rdmakit_refused_connections_total",
		"Device connections the soft NIC refused: bad hello, auth token, version or a malformed frame.", nil, nil)
	descConns = prometheus.NewDesc("rdmakit_node_connections",
		"cm connections the node is serving now.", nil, nil)
	descHandshakes = prometheus.NewDesc("rdmakit_node_handshakes",
		"cm connection exchanges under way.", nil, nil)
	descAccepted = prometheus.NewDesc("rdmakit_node_accepted_total",
		"cm connections the node established.", nil, nil)
	descRejected = prometheus.NewDesc("rdmakit_node_rejected_total",
		"cm connection requests the node refused (bad token, wrong service) or that failed during the exchange.", nil, nil)
	descDeparted = prometheus.NewDesc("rdmakit_node_departed_total",
		"Clients the node found gone (failed liveness probe or QP in ERROR) and freed.", nil, nil)
	descMemory = prometheus.NewDesc("rdmakit_node_memory_bytes",
		"Bytes of memory the node registered for peers.", nil, nil)
)

// collector is the prometheus.Collector of a Server.
type collector struct{ s *Server }

// Describe sends the descriptors of every metric.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOps, descBytes, descErrors, descRNR, descWrongPeer, descOutstanding, descQPs,
		descPeers, descRefused, descConns, descHandshakes, descAccepted, descRejected, descDeparted, descMemory} {
		ch <- d
	}
}

// Collect sends the current values.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	st := c.s.Stats()
	gauge(descConns, float64(st.Clients))
	gauge(descHandshakes, float64(st.Handshakes))
	counter(descAccepted, float64(st.Accepted))
	counter(descRejected, float64(st.Rejected))
	counter(descDeparted, float64(st.Departed))
	gauge(descMemory, float64(c.s.info.Memory))
	nst, refused, err := tcp.Stats(c.s.dev)
	if err != nil {
		return // not a tcp device: no soft-NIC counters
	}
	for op := 1; op < nic.MaxOpcode; op++ {
		name := verbs.Opcode(op).String()
		if v := nst.Ops[op]; v > 0 || !strings.HasPrefix(name, "Opcode(") {
			counter(descOps, float64(v), name)
		}
	}
	counter(descBytes, float64(nst.Bytes))
	counter(descErrors, float64(nst.Errors))
	counter(descRNR, float64(nst.RNR))
	counter(descWrongPeer, float64(nst.WrongPeer))
	gauge(descOutstanding, float64(nst.Outstanding))
	gauge(descQPs, float64(nst.ConnectedQPs))
	gauge(descPeers, float64(nst.Peers))
	counter(descRefused, float64(refused))
}

// metricsServer serves a Server's metrics, the Go runtime's and the
// process's in the Prometheus text format.
type metricsServer struct {
	url  string
	srv  *http.Server
	done chan struct{}
}

// startMetrics listens on addr and serves /metrics.
func startMetrics(s *Server, addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("memnode: metrics: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if ms, ok := s.svc.(MetricsService); ok {
		if err := reg.Register(ms.Collector()); err != nil {
			ln.Close()
			return nil, fmt.Errorf("memnode: metrics of %s: %w", s.svc.Name(), err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("rdmakit node: metrics at /metrics\n"))
	})
	m := &metricsServer{url: "http://" + ln.Addr().String() + "/metrics",
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server", "err", err)
		}
	}()
	return m, nil
}

// close lets a scrape under way finish for a short while, then cuts it:
// shutdown stays bounded.
func (m *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close()
	}
	<-m.done
	return nil
}
