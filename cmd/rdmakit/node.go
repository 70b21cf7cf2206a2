package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// nodeFlags are the flags of rdmakit node.
type nodeFlags struct {
	uri      string
	cm       string
	mem      string
	mrs      int
	access   string
	token    string
	metrics  string
	recv     int
	recvSize string
	echo     bool
	probe    time.Duration
}

func newNodeCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Serve registered memory to remote peers (a memory blade)",
		Long: `node registers --mem bytes of memory, split into --mrs regions, on a device
(default a tcp:// soft NIC) and serves them until SIGINT or SIGTERM. Clients
connect through the connection manager at --cm; each gets an RC queue pair on
the node and, as private data, the descriptors (address, length, rkey) of
every region. READ, WRITE and atomics are executed by the soft NIC without
the node's goroutines; the node only re-posts receives (--recv per
connection) for SEND and WRITE_WITH_IMM and, with --echo, sends every
received message back. Counters are served in Prometheus format at
http://--metrics/metrics.`,
		Example: `  rdmakit node --mem 64MiB
  rdmakit node --uri tcp://0.0.0.0:7471?advertise=10.0.0.5:7471 --cm :7472 --mem 1GiB --mrs 4 --token s3cret
  rdmakit node --mem 16MiB --echo --recv 512 --recv-size 64KiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNode(cmd.Context(), cmd.OutOrStdout(), &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.uri, "uri", "tcp://127.0.0.1:7471", "device URI the node serves on")
	fl.StringVar(&f.cm, "cm", "127.0.0.1:7472", "connection-manager side channel listen address (host:port)")
	fl.StringVar(&f.mem, "mem", "64MiB", "total registered memory, e.g. 4KiB, 64MiB, 1GiB")
	fl.IntVar(&f.mrs, "mrs", 1, "number of memory regions --mem is split into")
	fl.StringVar(&f.access, "access", "all", "what peers may do: all or a comma-separated list of read, write, atomic")
	fl.StringVar(&f.token, "token", "", "auth token: passed to the device (token=) and required as the cm private data")
	fl.StringVar(&f.metrics, "metrics", "127.0.0.1:9471", "HTTP listen address for Prometheus /metrics; empty disables")
	fl.IntVar(&f.recv, "recv", 256, "receives kept posted per connection for SEND and WRITE_WITH_IMM")
	fl.StringVar(&f.recvSize, "recv-size", "4KiB", "bytes per receive: the largest SEND the node accepts")
	fl.BoolVar(&f.echo, "echo", false, "send every received message back on its connection (SEND latency tests)")
	fl.DurationVar(&f.probe, "probe", 5*time.Second, "how often each connection's client is checked (a 0-byte READ); a gone client's connection is freed. 0 disables")
	return cmd
}

// nodeConfig is the validated configuration of a node.
type nodeConfig struct {
	uri      string // with the token
	cm       string
	metrics  string
	mem      int64
	mrs      int
	mrAccess verbs.Access // regions
	qpAccess verbs.Access // what peers may do through their QP
	access   string       // canonical: "read,write,atomic"
	token    string
	recv     int
	recvSize int
	echo     bool
	probe    time.Duration
}

func (f *nodeFlags) config() (*nodeConfig, error) {
	c := &nodeConfig{cm: f.cm, metrics: f.metrics, mrs: f.mrs, token: f.token, recv: f.recv, echo: f.echo, probe: f.probe}
	if f.probe < 0 {
		return nil, fmt.Errorf("--probe %v: must not be negative", f.probe)
	}
	var err error
	if c.mem, err = parseBytes(f.mem); err != nil {
		return nil, fmt.Errorf("--mem: %w", err)
	}
	if f.mrs <= 0 || f.mrs > cm.MaxDescs {
		return nil, fmt.Errorf("--mrs %d: want 1..%d (the descriptors must fit in the cm private data)", f.mrs, cm.MaxDescs)
	}
	if c.mem%int64(f.mrs) != 0 || c.mem/int64(f.mrs)%8 != 0 {
		return nil, fmt.Errorf("--mem %s does not split into %d regions of a multiple of 8 bytes", f.mem, f.mrs)
	}
	if f.recv <= 0 {
		return nil, fmt.Errorf("--recv %d: want at least 1", f.recv)
	}
	rs, err := parseBytes(f.recvSize)
	if err != nil || rs > 1<<30 {
		return nil, fmt.Errorf("--recv-size %q: want 1 B .. 1 GiB", f.recvSize)
	}
	c.recvSize = int(rs)
	if c.qpAccess, c.access, err = parseAccess(f.access); err != nil {
		return nil, err
	}
	c.mrAccess = verbs.AccessLocalWrite | c.qpAccess
	if c.uri, err = withQuery(f.uri, "token", f.token); err != nil {
		return nil, err
	}
	return c, nil
}

// parseAccess parses --access into the remote access flags and their
// canonical name.
func parseAccess(s string) (verbs.Access, string, error) {
	if strings.TrimSpace(s) == "all" {
		s = "read,write,atomic"
	}
	var a verbs.Access
	for name := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(strings.ToLower(name)) {
		case "read":
			a |= verbs.AccessRemoteRead
		case "write":
			a |= verbs.AccessRemoteWrite
		case "atomic", "atomics":
			a |= verbs.AccessRemoteAtomic
		default:
			return 0, "", fmt.Errorf("--access %q: want all or a list of read, write, atomic", s)
		}
	}
	var names []string
	for _, x := range []struct {
		f    verbs.Access
		name string
	}{{verbs.AccessRemoteRead, "read"}, {verbs.AccessRemoteWrite, "write"}, {verbs.AccessRemoteAtomic, "atomic"}} {
		if a&x.f != 0 {
			names = append(names, x.name)
		}
	}
	return a, strings.Join(names, ","), nil
}

// withQuery returns uri with the query parameter key set to value (uri
// unchanged when value is empty).
func withQuery(uri, key, value string) (string, error) {
	if value == "" {
		return uri, nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("--uri %q: %w", uri, err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// node is a running memory node.
type node struct {
	cfg     *nodeConfig
	dev     verbs.Device
	pd      verbs.PD
	mrs     []verbs.MR
	descs   []cm.MRDesc
	private []byte // the descriptors, sent to every client
	ln      *cm.Listener
	log     *slog.Logger

	conns    sync.WaitGroup
	mu       sync.Mutex
	live     map[*nodeConn]struct{} // established connections, for the prober
	active   atomic.Int64           // connections being served
	accepted atomic.Uint64          // connections established, ever
	// handshakes counts the connections whose cm handshake is under way.
	handshakes sync.WaitGroup
	rejected   atomic.Uint64 // requests refused or failed, ever
}

// nodeInfo is the node's JSON announcement.
type nodeInfo struct {
	Device   string       `json:"device"`
	CM       string       `json:"cm"`
	Metrics  string       `json:"metrics,omitempty"`
	Access   string       `json:"access"`
	Recv     int          `json:"recv"`
	RecvSize int          `json:"recv_size"`
	Echo     bool         `json:"echo"`
	Regions  []nodeRegion `json:"regions"`
}

// nodeRegion is a region's descriptor in the JSON announcement.
type nodeRegion struct {
	Addr uint64 `json:"addr"`
	Len  uint64 `json:"len"`
	RKey uint32 `json:"rkey"`
}

func runNode(ctx context.Context, w io.Writer, f *nodeFlags) (err error) {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	n := &node{cfg: cfg, live: map[*nodeConn]struct{}{}}
	if n.dev, err = verbs.Open(cfg.uri); err != nil {
		return err
	}
	n.log = slog.Default().With("device", n.dev.Address())
	defer func() {
		if cerr := n.dev.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if n.pd, err = n.dev.AllocPD(); err != nil {
		return err
	}
	size := cfg.mem / int64(cfg.mrs)
	for range cfg.mrs {
		mr, err := n.pd.AllocMR(int(size), cfg.mrAccess)
		if err != nil {
			return fmt.Errorf("register %s: %w", formatBytes(size), err)
		}
		n.mrs = append(n.mrs, mr)
		n.descs = append(n.descs, cm.DescOf(mr))
	}
	n.private = cm.EncodeDescs(n.descs)

	var metricsURL string
	var msrv *http.Server
	var mdone chan struct{}
	if cfg.metrics != "" {
		mln, err := net.Listen("tcp", cfg.metrics)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		metricsURL = "http://" + mln.Addr().String() + "/metrics"
		msrv = &http.Server{Handler: n.metricsHandler(), ReadHeaderTimeout: 5 * time.Second}
		mdone = make(chan struct{})
		go func() {
			defer close(mdone)
			if err := msrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("metrics server", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := msrv.Shutdown(sctx); err != nil {
				msrv.Close()
			}
			<-mdone
		}()
	}

	lc := cm.ListenConfig{Logger: slog.Default()}
	if n.ln, err = lc.Listen(ctx, n.dev, cfg.cm); err != nil {
		return err
	}
	defer n.ln.Close()

	n.announce(w, metricsURL)
	n.log.Info("node serving", "cm", n.ln.Addr(), "metrics", metricsURL, "regions", len(n.descs))

	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if cfg.probe > 0 {
		n.conns.Add(1)
		go func() {
			defer n.conns.Done()
			n.prober(connCtx)
		}()
	}
	for {
		req, err := n.ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, cm.ErrClosed) {
				break
			}
			n.log.Warn("cm accept", "err", err)
			continue
		}
		if cfg.token != "" && subtle.ConstantTimeCompare(req.PrivateData(), []byte(cfg.token)) != 1 {
			n.rejected.Add(1)
			n.log.Warn("connection refused: bad token", "peer", req.PeerAddress(), "from", req.SideChannelAddr())
			req.Reject("bad token")
			continue
		}
		n.conns.Add(1)
		n.active.Add(1)
		n.handshakes.Add(1)
		go func() {
			defer n.conns.Done()
			defer n.active.Add(-1)
			n.serveConn(connCtx, req)
		}()
	}

	// Graceful shutdown: stop accepting, let the handshakes under way
	// finish (closing the listener would cut them, though their clients
	// may already hold their ends), end the connections, close the device
	// (deferred).
	n.log.Info("node shutting down", "connections", n.active.Load())
	n.handshakes.Wait()
	n.ln.Close()
	cancel()
	n.conns.Wait()
	fmt.Fprintf(w, "rdmakit node: stopped after %d connections\n", n.accepted.Load())
	return nil
}

// track adds an established connection to the prober's set, or removes
// it.
func (n *node) track(c *nodeConn, add bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if add {
		n.live[c] = struct{}{}
	} else {
		delete(n.live, c)
	}
}

// prober sends every established connection's client a liveness probe
// each --probe interval, until ctx ends.
func (n *node) prober(ctx context.Context) {
	t := time.NewTicker(n.cfg.probe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Holding mu, no connection can be released under the probe.
		n.mu.Lock()
		for c := range n.live {
			c.probe()
		}
		n.mu.Unlock()
	}
}

// announce prints the node's addresses and regions, for people and, as
// one JSON line, for programs.
func (n *node) announce(w io.Writer, metricsURL string) {
	c := n.cfg
	fmt.Fprintf(w, "rdmakit node\n")
	fmt.Fprintf(w, "  device   %s\n", n.dev.Address())
	fmt.Fprintf(w, "  cm       %s\n", n.ln.Addr())
	if metricsURL != "" {
		fmt.Fprintf(w, "  metrics  %s\n", metricsURL)
	} else {
		fmt.Fprintf(w, "  metrics  off\n")
	}
	plural := "s"
	if c.mrs == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "  memory   %s in %d region%s, access %s\n", formatBytes(c.mem), c.mrs, plural, c.access)
	echo := "off"
	if c.echo {
		echo = "on"
	}
	fmt.Fprintf(w, "  receives %d of %s per connection, echo %s\n", c.recv, formatBytes(int64(c.recvSize)), echo)
	for i, d := range n.descs {
		fmt.Fprintf(w, "  region %d %v\n", i, d)
	}
	info := nodeInfo{Device: n.dev.Address(), CM: n.ln.Addr(), Metrics: metricsURL, Access: c.access,
		Recv: c.recv, RecvSize: c.recvSize, Echo: c.echo, Regions: []nodeRegion{}}
	for _, d := range n.descs {
		info.Regions = append(info.Regions, nodeRegion{Addr: d.Addr, Len: d.Len, RKey: d.RKey})
	}
	b, _ := json.Marshal(info)
	fmt.Fprintf(w, "%s\n", b)
}
