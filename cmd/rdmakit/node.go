package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/verbs"
)

// nodeFlags are the flags of rdmakit node.
type nodeFlags struct {
	uri      string
	cm       string
	mem      string
	mrs      int
	access   string
	token    tokenFlags
	metrics  string
	recv     int
	recvSize string
	echo     bool
	probe    time.Duration
	maxConns int
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
http://--metrics/metrics. The auth token comes from --token, --token-file
or $RDMAKIT_TOKEN. The node is the memnode library's server.`,
		Example: `  rdmakit node --mem 64MiB
  RDMAKIT_TOKEN=s3cret rdmakit node --uri tcp://0.0.0.0:7471?advertise=10.0.0.5:7471 --cm :7472 --mem 1GiB --mrs 4
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
	f.token.add(fl, "auth token: passed to the device (token=) and required as the cm private data")
	fl.StringVar(&f.metrics, "metrics", "127.0.0.1:9471", "HTTP listen address for Prometheus /metrics; empty disables")
	fl.IntVar(&f.recv, "recv", memnode.DefaultRecv, "receives kept posted per connection for SEND and WRITE_WITH_IMM")
	fl.StringVar(&f.recvSize, "recv-size", "4KiB", "bytes per receive: the largest SEND the node accepts")
	fl.BoolVar(&f.echo, "echo", false, "send every received message back on its connection (SEND latency tests)")
	fl.IntVar(&f.maxConns, "max-conns", memnode.DefaultMaxClients, "clients served at once; more are refused (\"node full\"). A tcp device also gets maxconns= for them unless --uri sets it")
	fl.DurationVar(&f.probe, "probe", memnode.DefaultProbe, "how often each connection's client is checked (a 0-byte READ); a gone client's connection is freed. 0 disables")
	return cmd
}

// nodeFlagNames maps memnode.Config fields to the flags that set them,
// for error messages.
var nodeFlagNames = map[string]string{"Device": "--uri", "Memory": "--mem", "Regions": "--mrs", "Access": "--access",
	"Token": "--token", "Recv": "--recv", "RecvSize": "--recv-size", "Probe": "--probe", "MaxClients": "--max-conns"}

// config turns the flags into a memnode.Config.
func (f *nodeFlags) config() (memnode.Config, error) {
	c := memnode.Config{Device: f.uri, CM: f.cm, Metrics: f.metrics, Regions: f.mrs, Recv: f.recv, Echo: f.echo, Probe: f.probe, MaxClients: f.maxConns}
	switch {
	case f.probe < 0:
		return c, fmt.Errorf("--probe %v: must not be negative", f.probe)
	case f.probe == 0:
		c.Probe = -1 // disabled
	case f.mrs <= 0:
		return c, fmt.Errorf("--mrs %d: want at least 1", f.mrs)
	case f.maxConns <= 0:
		return c, fmt.Errorf("--max-conns %d: want at least 1", f.maxConns)
	case f.recv <= 0:
		return c, fmt.Errorf("--recv %d: want at least 1", f.recv)
	}
	var err error
	if c.Memory, err = parseBytes(f.mem); err != nil {
		return c, fmt.Errorf("--mem: %w", err)
	}
	rs, err := parseBytes(f.recvSize)
	if err != nil || rs > memnode.MaxRecvSize {
		return c, fmt.Errorf("--recv-size %q: want 1 B .. 1 GiB", f.recvSize)
	}
	c.RecvSize = int(rs)
	if c.Access, err = parseAccess(f.access); err != nil {
		return c, err
	}
	if c.Token, err = f.token.value(); err != nil {
		return c, err
	}
	return c, nil
}

// flagError rewords a memnode.ConfigError in terms of the flags.
func flagError(err error) error {
	var ce *memnode.ConfigError
	if errors.As(err, &ce) {
		if name, ok := nodeFlagNames[ce.Field]; ok {
			return fmt.Errorf("%s %v: %s", name, ce.Value, ce.Reason)
		}
	}
	return err
}

// parseAccess parses --access into the remote access flags.
func parseAccess(s string) (verbs.Access, error) {
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
			return 0, fmt.Errorf("--access %q: want all or a list of read, write, atomic", s)
		}
	}
	return a, nil
}

// runNode serves a memory node until ctx ends (SIGINT, SIGTERM).
func runNode(ctx context.Context, w io.Writer, f *nodeFlags) error {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	cfg.Logger = slog.Default()
	srv, err := memnode.Start(ctx, cfg)
	if err != nil {
		return flagError(err)
	}
	announce(w, srv.Info(), f.mrs)
	<-ctx.Done()
	err = srv.Close()
	fmt.Fprintf(w, "rdmakit node: stopped after %d connections\n", srv.Stats().Accepted)
	return err
}

// announce prints the node's addresses and regions, for people and, as
// one JSON line (memnode.ReadInfo), for programs.
func announce(w io.Writer, info memnode.Info, mrs int) {
	fmt.Fprintf(w, "rdmakit node\n")
	fmt.Fprintf(w, "  device   %s\n", info.Device)
	fmt.Fprintf(w, "  cm       %s\n", info.CM)
	if info.Metrics != "" {
		fmt.Fprintf(w, "  metrics  %s\n", info.Metrics)
	} else {
		fmt.Fprintf(w, "  metrics  off\n")
	}
	plural := "s"
	if mrs == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "  memory   %s in %d region%s, access %s\n", formatBytes(info.Memory), mrs, plural, info.Access)
	echo := "off"
	if info.Echo {
		echo = "on"
	}
	fmt.Fprintf(w, "  receives %d of %s per connection, echo %s\n", info.Recv, formatBytes(int64(info.RecvSize)), echo)
	if info.Token {
		fmt.Fprintf(w, "  token    required\n")
	}
	for i, r := range info.Regions {
		fmt.Fprintf(w, "  region %d %v\n", i, r.Desc())
	}
	b, _ := json.Marshal(info)
	fmt.Fprintf(w, "%s\n", b)
}
