package memnode

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rdmakit/rdmakit/cm"
	"github.com/rdmakit/rdmakit/verbs"
)

// Defaults of Config.
const (
	DefaultDevice          = "tcp://127.0.0.1:0"
	DefaultCM              = "127.0.0.1:0"
	DefaultMemory          = 64 << 20
	DefaultRecv            = 256
	DefaultRecvSize        = 4 << 10
	DefaultProbe           = 5 * time.Second
	DefaultShutdownTimeout = 500 * time.Millisecond
	DefaultMaxClients      = 1024
	// MaxRecvSize bounds Config.RecvSize.
	MaxRecvSize = 1 << 30
)

// Config configures a Server. The zero value serves 64 MiB in one region
// on a tcp device at a free loopback port.
type Config struct {
	// Device is the URI of the device the server opens and serves on
	// (default DefaultDevice). With a Token it gets the query parameter
	// token= (the tcp device's own handshake checks it).
	Device string
	// CM is the connection manager's listen address, host:port (default
	// DefaultCM: a free loopback port; see Info.CM).
	CM string
	// Token, when set, must be every client's Hello.Token; others are
	// refused. It must not contain a NUL byte.
	Token string
	// Metrics is the listen address of the Prometheus endpoint /metrics;
	// empty serves none.
	Metrics string
	// HandshakeTimeout bounds each client's connection exchange (default
	// cm.DefaultHandshakeTimeout). Exchanges run concurrently: a slow one
	// delays only itself.
	HandshakeTimeout time.Duration
	// Probe is how often each client is checked with a 0-byte RDMA READ
	// (default DefaultProbe); negative disables the probe.
	Probe time.Duration
	// ShutdownTimeout bounds how long Close waits for sessions to end
	// before it closes the device under them (default
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// MaxClients caps the clients served at once and the connection
	// exchanges under way (default DefaultMaxClients): a request beyond
	// it is refused ("node full"), so a flood of dialers cannot make the
	// node allocate a QP, CQ and receive buffers each. On a tcp:// device
	// without its own maxconns= it also sets maxconns= to MaxClients plus
	// one per client for the reverse direction, bounding raw connections.
	MaxClients int
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger

	// NewService builds what clients are served; nil serves the memory
	// node's regions, configured by the fields below.
	NewService NewServiceFunc

	// Memory is the bytes registered for clients (default
	// DefaultMemory), split into Regions equal regions (default 1, at
	// most cm.MaxDescs) of a multiple of 8 bytes.
	Memory  int64
	Regions int
	// Access is what clients may do to the regions: a combination of
	// verbs.AccessRemoteRead, AccessRemoteWrite and AccessRemoteAtomic
	// (default all three).
	Access verbs.Access
	// Recv is the receives kept posted per client for SEND and
	// WRITE_WITH_IMM (default DefaultRecv), RecvSize the bytes of each
	// (default DefaultRecvSize, at most MaxRecvSize): the largest SEND
	// the node takes.
	Recv     int
	RecvSize int
	// Echo sends every received message back on its client's QP.
	Echo bool
}

// ConfigError is a Config field the server cannot run with. It matches
// verbs.ErrInvalidArg.
type ConfigError struct {
	Field  string // the Config field, e.g. "Recv"
	Value  any    // its value
	Reason string // what is wrong, e.g. "want 1..65535"
}

// Error returns e.g. "memnode: Recv 100000: want 1..65535 ...".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("memnode: %s %v: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns verbs.ErrInvalidArg.
func (e *ConfigError) Unwrap() error { return verbs.ErrInvalidArg }

// remoteAccess is every remote access flag.
const remoteAccess = verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic

// withDefaults returns c with its zero fields set to their defaults, or
// the first field that is out of range.
func (c Config) withDefaults() (Config, error) {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if c.Device == "" {
		c.Device = DefaultDevice
	}
	if c.CM == "" {
		c.CM = DefaultCM
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = cm.DefaultHandshakeTimeout
	}
	if c.Probe == 0 {
		c.Probe = DefaultProbe
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Memory == 0 {
		c.Memory = DefaultMemory
	}
	if c.Access == 0 {
		c.Access = remoteAccess
	}
	def(&c.MaxClients, DefaultMaxClients)
	def(&c.Regions, 1)
	def(&c.Recv, DefaultRecv)
	def(&c.RecvSize, DefaultRecvSize)
	switch {
	case strings.IndexByte(c.Token, 0) >= 0:
		return c, &ConfigError{"Token", "(hidden)", "must not contain a NUL byte"}
	case c.HandshakeTimeout < 0:
		return c, &ConfigError{"HandshakeTimeout", c.HandshakeTimeout, "must not be negative"}
	case c.MaxClients < 0:
		return c, &ConfigError{"MaxClients", c.MaxClients, "want at least 1"}
	case c.ShutdownTimeout < 0:
		return c, &ConfigError{"ShutdownTimeout", c.ShutdownTimeout, "must not be negative"}
	case c.NewService != nil:
		return c, nil // the fields below are the regions service's
	case c.Regions < 0 || c.Regions > cm.MaxDescs:
		return c, &ConfigError{"Regions", c.Regions, fmt.Sprintf("want 1..%d (the descriptors must fit in the cm private data)", cm.MaxDescs)}
	case c.Memory < 0 || c.Memory%int64(c.Regions) != 0 || c.Memory/int64(c.Regions)%8 != 0:
		return c, &ConfigError{"Memory", c.Memory, fmt.Sprintf("does not split into %d regions of a multiple of 8 bytes", c.Regions)}
	case c.Access&^remoteAccess != 0:
		return c, &ConfigError{"Access", c.Access, "want remote read, write and atomic flags only"}
	case c.Recv < 0:
		return c, &ConfigError{"Recv", c.Recv, "want at least 1"}
	case c.RecvSize < 0 || c.RecvSize > MaxRecvSize:
		return c, &ConfigError{"RecvSize", c.RecvSize, "want 1 B .. 1 GiB"}
	}
	return c, nil
}

// AccessString names remote access flags the way Info.Access does:
// "read,write,atomic" or a part of it.
func AccessString(a verbs.Access) string {
	var names []string
	for _, x := range []struct {
		f    verbs.Access
		name string
	}{{verbs.AccessRemoteRead, "read"}, {verbs.AccessRemoteWrite, "write"}, {verbs.AccessRemoteAtomic, "atomic"}} {
		if a&x.f != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ",")
}
